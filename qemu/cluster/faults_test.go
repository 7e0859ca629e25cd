package cluster

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFaultVerbsRefuseBadInput runs every fault verb with input it must
// refuse, on a cluster whose VMs are all stopped: each fails with an
// error that names the problem, and the cluster's state stays as it was.
func TestFaultVerbsRefuseBadInput(t *testing.T) {
	dir := t.TempDir()
	st := State{Cluster: Name, Domain: DefaultDomain, InitialSize: 3}
	for i, name := range []string{"n1", "n2", "n3"} {
		nd := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(nd, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(nd, "disk.qcow2"), []byte("disk"), 0o644))
		st.Nodes = append(st.Nodes, Node{Name: name, Dir: nd, IP: nodeIP(i + 1)})
	}
	require.NoError(t, WriteState(dir, st))
	before, err := os.ReadFile(filepath.Join(dir, StateFile))
	require.NoError(t, err)
	c, err := Open(Config{Dir: dir, Log: t.Logf})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, tt := range []struct {
		name string
		run  func() error
		is   error
		msg  string
	}{
		{"kill an unknown node", func() error { return c.Kill(ctx, "n9") }, ErrUnknownNode, `kill: node "n9": no such node in ` + dir + ` (nodes: n1, n2, n3)`},
		{"kill a stopped node", func() error { return c.Kill(ctx, "n1") }, ErrStopped, "kill n1: node is stopped; start it first"},
		{"poweroff a stopped node", func() error { return c.Poweroff(ctx, "n2", time.Second) }, ErrStopped, "poweroff n2: node is stopped"},
		{"reset a stopped node", func() error { return c.Reset(ctx, "n3") }, ErrStopped, "reset n3: node is stopped"},
		{"pause a stopped node", func() error { return c.Pause(ctx, "n1") }, ErrStopped, "pause n1: node is stopped"},
		{"resume a stopped node", func() error { return c.Resume(ctx, "n1") }, ErrStopped, "resume n1: node is stopped"},
		{"pause an unknown node", func() error { return c.Pause(ctx, "N1") }, ErrUnknownNode, `pause: node "N1": no such node`},
		{"start an unknown node", func() error { return c.Start(ctx, "n1", "n4") }, ErrUnknownNode, `start: node "n4": no such node`},
		{"start nothing", func() error { return c.Start(ctx) }, nil, "start: no node named"},
		{"wipe an unknown node", func() error { return c.Wipe(ctx, "n0") }, ErrUnknownNode, `wipe: node "n0": no such node`},
		{"partition every node", func() error { return c.Partition(ctx, "n3", "n1", "n2") }, nil, "partition n3 n1 n2: that is every node"},
		{"partition nothing", func() error { return c.Partition(ctx) }, nil, "partition: no node named"},
		{"partition a node twice", func() error { return c.Partition(ctx, "n1", "n1") }, nil, "partition: n1 named twice"},
		{"partition an unknown node", func() error { return c.Partition(ctx, "n1", "x") }, ErrUnknownNode, `partition: node "x": no such node`},
		{"cut every node one way", func() error { return c.CutOneWay(ctx, true, "n1", "n2", "n3") }, nil, "one-way cut n1 n2 n3: that is every node"},
		{"cut nothing one way", func() error { return c.CutOneWay(ctx, false) }, nil, "one-way cut: no node named"},
		{"cut an unknown node one way", func() error { return c.CutOneWay(ctx, true, "n4") }, ErrUnknownNode, `one-way cut: node "n4": no such node`},
		{"remove an unknown node", func() error { return c.Remove(ctx, "n7") }, ErrUnknownNode, `remove: node "n7": no such node`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			require.Error(t, err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			assert.Contains(t, err.Error(), tt.msg)
			after, rerr := os.ReadFile(filepath.Join(dir, StateFile))
			require.NoError(t, rerr)
			assert.Equal(t, string(before), string(after), "state.json changed")
			for _, n := range st.Nodes {
				assert.FileExists(t, filepath.Join(n.Dir, "disk.qcow2"), "%s lost its disk", n.Name)
			}
		})
	}
}

// TestWipe deletes a stopped node's disk and nothing else of it.
func TestWipe(t *testing.T) {
	dir := t.TempDir()
	nd := filepath.Join(dir, "n1")
	require.NoError(t, os.MkdirAll(nd, 0o755))
	for _, f := range []string{"disk.qcow2", "OVMF_VARS.fd", "console.log"} {
		require.NoError(t, os.WriteFile(filepath.Join(nd, f), []byte(f), 0o644))
	}
	require.NoError(t, WriteState(dir, State{Cluster: Name, Nodes: []Node{{Name: "n1", Dir: nd, IP: nodeIP(1)}}}))
	c, err := Open(Config{Dir: dir, Log: t.Logf})
	require.NoError(t, err)
	require.NoError(t, c.Wipe(context.Background(), "n1"))
	assert.NoFileExists(t, filepath.Join(nd, "disk.qcow2"))
	assert.FileExists(t, filepath.Join(nd, "OVMF_VARS.fd"), "the machine's UEFI variables are not the disk")
	// A node without a disk is wiped already.
	require.NoError(t, c.Wipe(context.Background(), "n1"))
}

func TestFreeIP(t *testing.T) {
	used := map[netip.Addr]bool{nodeIP(1): true, nodeIP(2): true, nodeIP(4): true}
	ip, err := freeIP(used)
	require.NoError(t, err)
	assert.Equal(t, nodeIP(3), ip)
	all := map[netip.Addr]bool{}
	for i := 1; i <= maxNodes; i++ {
		all[nodeIP(i)] = true
	}
	_, err = freeIP(all)
	assert.ErrorContains(t, err, "no free address")
}

func TestPeerActive(t *testing.T) {
	page := `# HELP etcd_network_active_peers The current number of active peer connections.
etcd_network_active_peers{Local="8c0a8790535d7545",Remote="17f71e3bf3d180ba"} 1
etcd_network_active_peers{Local="8c0a8790535d7545",Remote="ccd49fd81aae6301"} 0
`
	for _, tt := range []struct {
		id     uint64
		active bool
		err    string
	}{
		{0x17f71e3bf3d180ba, true, ""},
		{0xccd49fd81aae6301, false, ""},
		{0x1, false, "no etcd_network_active_peers for member 1"},
	} {
		got, err := peerActive(page, tt.id)
		if tt.err != "" {
			assert.EqualError(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.active, got, "peerActive(%x)", tt.id)
	}
}

func TestHistogramOver(t *testing.T) {
	page := `# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.128"} 95
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.256"} 97
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.512"} 99
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 104
etcd_disk_wal_fsync_duration_seconds_sum 31.5
etcd_disk_wal_fsync_duration_seconds_count 104
etcd_disk_backend_commit_duration_seconds_count 7
`
	const name = "etcd_disk_wal_fsync_duration_seconds"
	n, err := histogramOver(page, name, 256*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 7, n)
	n, err = histogramOver(page, name, 128*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 9, n)
	_, err = histogramOver(page, name, 300*time.Millisecond)
	assert.EqualError(t, err, `no etcd_disk_wal_fsync_duration_seconds bucket le="0.3"`)
	_, err = histogramOver(page, "etcd_missing", 256*time.Millisecond)
	assert.EqualError(t, err, "no etcd_missing_count")
}
