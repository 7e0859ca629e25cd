package main

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, args, &out, &out)
	return out.String(), err
}

func TestClusterFlags(t *testing.T) {
	empty := t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"up without dir", []string{"cluster", "up"}, `"dir" not set`},
		{"add without dir", []string{"cluster", "add"}, `"dir" not set`},
		{"status without dir", []string{"cluster", "status"}, `"dir" not set`},
		{"down without dir", []string{"cluster", "down"}, `"dir" not set`},
		{"no nodes", []string{"cluster", "up", "--nodes", "0", "--dir", empty}, "--nodes 0: want at least 1"},
		{"add to nothing", []string{"cluster", "add", "--dir", empty}, "no cluster in " + empty},
		{"status of nothing", []string{"cluster", "status", "--dir", empty}, "no cluster in " + empty},
		{"down of nothing", []string{"cluster", "down", "--dir", empty}, "state.json is missing"},
		{"one-way cut of no direction", []string{"cluster", "partition", "--one-way", "both", "n1", "--dir", empty}, `--one-way "both": want out or in`},
		{"disk limit of nothing", []string{"cluster", "limit-disk", "n1", "--dir", empty}, "give --iops or --bps (or both) to limit the disk, or --off to lift the limit"},
		{"disk limit and off", []string{"cluster", "limit-disk", "n1", "--iops", "5", "--off", "--dir", empty}, "--off lifts the limit: give it without --iops or --bps"},
		{"negative disk limit", []string{"cluster", "limit-disk", "n1", "--bps", "-1", "--dir", empty}, "--iops 0, --bps -1: negative"},
		{"impair of nothing", []string{"cluster", "impair", "n1", "--dir", empty}, "give --loss or --delay (or both); heal undoes an impairment"},
		{"impair losing everything", []string{"cluster", "impair", "n1", "--loss", "100", "--dir", empty}, "--loss 100: want a percentage of at least 0 and under 100 (all frames lost is a partition)"},
		{"impair too slow", []string{"cluster", "impair", "n1", "--delay", "1m", "--dir", empty}, "--delay 1m0s: want 0 to 10s"},
		{"impair of a cluster that is not there", []string{"cluster", "impair", "n1", "--loss", "10", "--dir", empty}, "no cluster in " + empty},
		{"disk limit of a cluster that is not there", []string{"cluster", "limit-disk", "n1", "--iops", "5", "--dir", empty}, "no cluster in " + empty},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runCLI(t, tt.args...)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// TestClusterDown stops what a state file lists: a crashed node, a node
// whose QEMU answers no QMP (stopped by force), no network daemon. The
// state stays for up to resume; etcdctl.env goes.
func TestClusterDown(t *testing.T) {
	dir := t.TempDir()
	n1, n2 := filepath.Join(dir, "n1"), filepath.Join(dir, "n2")
	require.NoError(t, os.MkdirAll(n1, 0o755))
	require.NoError(t, os.MkdirAll(n2, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(n1, "qemu.pid"), []byte("999999999\n"), 0o644))
	hung := exec.Command("sleep", "600")
	hung.Dir = n2
	require.NoError(t, hung.Start())
	exited := make(chan error, 1)
	go func() { exited <- hung.Wait() }()
	t.Cleanup(func() { hung.Process.Kill() })
	require.NoError(t, os.WriteFile(filepath.Join(n2, "qemu.pid"), []byte(strconv.Itoa(hung.Process.Pid)), 0o644))
	st := cluster.State{Cluster: "etcdbox", Domain: "etcdbox.internal", Image: "/i.img", InitialSize: 2,
		Network: cluster.NetInfo{Dir: filepath.Join(dir, "net")},
		Nodes:   []cluster.Node{{Name: "n1", Dir: n1, PID: 999999999}, {Name: "n2", Dir: n2, PID: hung.Process.Pid}}}
	require.NoError(t, cluster.WriteState(dir, st))
	require.NoError(t, cluster.WriteEnv(dir, []string{"https://127.0.0.1:1"}))

	// n1 is stopped, so up boots just it (here it finds no firmware).
	_, err := runCLI(t, "cluster", "up", "--dir", dir)
	assert.ErrorContains(t, err, "OVMF firmware: missing")
	_, err = runCLI(t, "cluster", "up", "--dir", dir, "--nodes", "2")
	assert.ErrorContains(t, err, "OVMF firmware: missing")

	out, err := runCLI(t, "cluster", "down", "--dir", dir, "--timeout", "1s")
	require.NoError(t, err, out)
	assert.Contains(t, out, "n1: not running")
	// n2 never wrote an init line: down does not wait for its ACPI power-off.
	assert.Contains(t, out, "n2: never reached the init; quitting qemu without waiting for an ACPI power-off")
	assert.Contains(t, out, "is down; disks and CA are kept")
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("down left the process running")
	}
	got, err := cluster.ReadState(dir)
	require.NoError(t, err, "down keeps the state for up to resume")
	assert.Len(t, got.Nodes, 2)
	assert.Zero(t, got.Nodes[1].PID)
	assert.NoFileExists(t, filepath.Join(dir, "etcdctl.env"))

	_, err = runCLI(t, "cluster", "up", "--dir", dir, "--nodes", "3")
	assert.ErrorContains(t, err, "it has 2 nodes, and up resumes them all")
}

// TestClusterNetd runs the hidden network daemon verb in-process and
// drives it through its control socket, as up and down do.
func TestClusterNetd(t *testing.T) {
	dir, err := os.MkdirTemp("", "netd-") // short: socket paths have 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"cluster", "netd", "--dir", dir, "--domain", "test.internal"}, &log, &log)
	}()
	c := vnet.NewClient(dir)
	require.NoError(t, c.Wait(ctx))
	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "test.internal", st.Domain)
	require.NoError(t, c.AddHost(ctx, vnet.Host{Name: "n1", MAC: []byte{0x52, 0x54, 0, 1, 2, 3}, IP: netip.MustParseAddr("10.88.0.11")}))
	require.NoError(t, c.Shutdown(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("netd did not stop after Shutdown")
	}
	assert.NoFileExists(t, vnet.SwitchSocket(dir))
}

func TestPrintStatus(t *testing.T) {
	n := func(name string, ip string, port int) cluster.Node {
		return cluster.Node{Name: name, IP: netip.MustParseAddr(ip), ClientPort: port}
	}
	rows := []cluster.NodeStatus{
		{Node: n("n1", "10.88.0.11", 4001), Running: true, State: cluster.StateRunning, Slot: "a",
			MemberStatus: cluster.MemberStatus{MemberID: 0x8e9e05c52164694d, Leader: true, Health: "healthy"}},
		{Node: n("n2", "10.88.0.12", 4003), Running: true, State: cluster.StatePartitioned, Slot: "a", Disk: qemu.DiskLimit{IOPS: 5, BPS: 1 << 20}, Links: "20% loss",
			MemberStatus: cluster.MemberStatus{MemberID: 0x1, Learner: true, Health: "healthy"}},
		{Node: n("n3", "10.88.0.13", 4005), State: cluster.StateStopped, Slot: "-", MemberStatus: cluster.MemberStatus{Health: "vm not running"}},
	}
	rows[2].Node.NextIP = netip.MustParseAddr("10.88.0.14")
	var b bytes.Buffer
	printStatus(&b, rows)
	want := `NODE  VM                                                      MEMBER ID         ROLE     LEADER  HEALTH          SLOT  ADDRESS                       ENDPOINT
n1    running                                                 8e9e05c52164694d  voter    yes     healthy         a     10.88.0.11                    https://127.0.0.1:4001
n2    partitioned (disk 5 iops, 1048576 B/s; links 20% loss)  0000000000000001  learner  no      healthy         a     10.88.0.12                    https://127.0.0.1:4003
n3    stopped                                                 -                 -        -       vm not running  -     10.88.0.13 (next 10.88.0.14)  https://127.0.0.1:4005
`
	assert.Equal(t, want, b.String())
}
