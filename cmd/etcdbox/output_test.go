package main

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

// updateGolden rewrites the golden files instead of comparing with them:
// ETCDBOX_UPDATE_GOLDEN=1 go test ./cmd/etcdbox -run TestGolden.
var updateGolden = os.Getenv("ETCDBOX_UPDATE_GOLDEN") == "1"

// golden compares got with testdata/golden/name byte for byte, or
// rewrites it when updateGolden.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if updateGolden {
		require.NoError(t, os.WriteFile(p, got, 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "ETCDBOX_UPDATE_GOLDEN=1 go test ./cmd/etcdbox -run TestGolden writes it")
	assert.Equal(t, string(want), string(got), "the output of %s changed: fields may be added, never renamed or removed", name)
}

// goldenForms emits v, what a command hands emit, as -o json and -o yaml
// and compares each with testdata/golden/command.json and .yaml.
func goldenForms(t *testing.T, command string, v any) {
	t.Helper()
	for _, format := range []string{"json", "yaml"} {
		var b bytes.Buffer
		require.NoError(t, emit(&b, format, v))
		golden(t, command+"."+format, b.Bytes())
	}
}

// TestGolden pins the -o json and -o yaml forms of every command that
// prints state, on fixed input run through the command's own conversion.
func TestGolden(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("status", func(t *testing.T) {
		goldenForms(t, "status", nodeStatusRows([]statusResult{
			{target: statusTarget{name: "n1", endpoint: "https://127.0.0.1:4002"}, status: nodeapi.Status{
				Name: "n1", Cluster: "etcdbox", Version: "v2", EtcdVersion: "3.7.3", Kernel: "6.1.0-57-amd64", Slot: "b", Blessed: true,
				Slots:      []nodeapi.Slot{{Name: "a", Generation: 1, State: nodeapi.SlotBlessed}, {Name: "b", Generation: 2, State: nodeapi.SlotBlessed}},
				Member:     nodeapi.Member{ID: "8e9e05c52164694d", ClusterID: "cdf818194e3a8c32", Role: nodeapi.RoleVoter, Leader: true, Healthy: true},
				CertExpiry: at, Uptime: 26*time.Hour + 3*time.Minute, Upgrade: nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle},
			}},
			{target: statusTarget{name: "https://10.0.0.12:9379", endpoint: "https://10.0.0.12:9379"}, status: nodeapi.Status{
				Name: "n2", Cluster: "etcdbox", Version: "v2", EtcdVersion: "3.7.3", Kernel: "6.1.0-57-amd64", Slot: "a",
				Slots:      []nodeapi.Slot{{Name: "a", Generation: 3, State: nodeapi.SlotTrying}, {Name: "b", Generation: 2, State: nodeapi.SlotBlessed}},
				Member:     nodeapi.Member{ID: "91bc3c398fb3c146", ClusterID: "cdf818194e3a8c32", Role: nodeapi.RoleVoter, Healthy: true},
				CertExpiry: at.Add(-24 * time.Hour), Uptime: 90 * time.Second, Upgrade: nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle},
			}},
			{target: statusTarget{name: "n3", endpoint: "https://127.0.0.1:4004"}, err: errors.New("dial tcp 127.0.0.1:4004: connect: connection refused")},
		}))
	})
	t.Run("status end to end", func(t *testing.T) {
		// The real command against a node API on loopback and a port nothing
		// listens on; only the two ports, which the kernel picks, are
		// replaced before the comparison.
		adminDir := filepath.Join(t.TempDir(), "pki")
		require.NoError(t, pki.Init(adminDir, false))
		up := serveStatusNode(t, adminDir, nodeapi.Status{
			Name: "n1", Cluster: "etcdbox", Version: "v2", EtcdVersion: "3.7.3", Kernel: "6.1.0-57-amd64", Slot: "a", Blessed: true,
			Slots:      []nodeapi.Slot{{Name: "a", Generation: 1, State: nodeapi.SlotBlessed}},
			Member:     nodeapi.Member{ID: "8e9e05c52164694d", ClusterID: "cdf818194e3a8c32", Role: nodeapi.RoleVoter, Leader: true, Healthy: true},
			CertExpiry: at, Uptime: time.Hour, Upgrade: nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle},
		})
		down := downPort(t)
		addr := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
		fixed := strings.NewReplacer(addr(up), "127.0.0.1:UP", addr(down), "127.0.0.1:DOWN")
		for _, format := range []string{"json", "yaml"} {
			out, _, err := runStatusCLI(t, "--endpoints", "https://"+addr(up)+",https://"+addr(down), "--pki", adminDir, "-o", format)
			require.Error(t, err, "the node down makes the exit status non-zero")
			golden(t, "status-e2e."+format, []byte(fixed.Replace(out)))
		}
	})
	t.Run("cluster status", func(t *testing.T) {
		goldenForms(t, "cluster-status", clusterStatusJSON([]cluster.NodeStatus{
			{Node: cluster.Node{Name: "n1", IP: netip.MustParseAddr("10.88.0.11"), ClientPort: 4001}, Running: true, State: "running",
				MemberStatus: cluster.MemberStatus{MemberID: 0x8e9e05c52164694d, Leader: true, Health: "healthy"}, Slot: "a", Disk: qemu.DiskLimit{IOPS: 5}, Links: "20% loss, 100ms delay"},
			{Node: cluster.Node{Name: "n2", IP: netip.MustParseAddr("10.88.0.12"), NextIP: netip.MustParseAddr("10.88.0.52"), ClientPort: 4003},
				State: "stopped", MemberStatus: cluster.MemberStatus{Health: "not running"}, Slot: "-"},
		}))
	})
	t.Run("members list", func(t *testing.T) {
		goldenForms(t, "members-list", memberRows(rollout.Membership{
			Members: []rollout.MemberState{
				{ID: 0x8e9e05c52164694d, Name: "n1", PeerURLs: []string{"https://n1.etcdbox.internal:2380"}, ClientURLs: []string{"https://n1.etcdbox.internal:2379"}, Healthy: true, Version: "3.7.3"},
				{ID: 0x91bc3c398fb3c146, Learner: true, PeerURLs: []string{"https://n4.etcdbox.internal:2380"}, Problem: "not started"},
			},
			Leader: 0x8e9e05c52164694d,
		}))
	})
	t.Run("alarm list", func(t *testing.T) {
		goldenForms(t, "alarm-list", alarmRows([]rollout.Alarm{{Member: "n2", ID: 0x91bc3c398fb3c146, Type: "NOSPACE"}}))
	})
	t.Run("backup list", func(t *testing.T) {
		// The rows as RunE builds them: the pushed ones, then each node's.
		rows := pushedRows([]backup.Pushed{{Ref: "10.0.0.5:5000/etcdbox/backups@sha256:755915b7bcd1f377de5a1d91a0b1e0ff742c6467b1b5deb422de83a299500465",
			Tag: "etcdbox-n2-4711", Cluster: "etcdbox", Member: "n2", Size: 2 << 20, Revision: 4711, Keys: 120,
			SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Taken: at}})
		rows = append(rows, backupRow{Node: "n1", Snapshot: nodeapi.Snapshot{Name: "etcd-20300102T030405Z.db", Path: "/var/lib/etcdbox/backups/etcd-20300102T030405Z.db",
			Member: "n2", Size: 2 << 20, Revision: 4711, Keys: 120, Hash: 3735928559, SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Taken: at}})
		goldenForms(t, "backup-list", rows)
	})
	t.Run("upgrade status", func(t *testing.T) {
		ref := "10.88.0.1:5000/etcdbox@sha256:755915b7bcd1f377de5a1d91a0b1e0ff742c6467b1b5deb422de83a299500465"
		goldenForms(t, "upgrade-status", rollStatusJSON(rollout.Status{
			Target: &rollout.Target{Image: ref, Started: at, By: "ops@laptop", Etcd: "3.7.3"},
			Records: []rollout.NodeRecord{
				{Name: "n1", Image: ref, State: rollout.StateDone, From: "a", To: "b", Snapshot: "/var/lib/etcdbox/backups/etcd-1.db", Started: at, Updated: at.Add(2 * time.Minute)},
				{Name: "n2", Image: ref, State: rollout.StateRolledBack, From: "a", To: "b", Error: "slot b: gate failed", Started: at, Updated: at.Add(5 * time.Minute)},
			},
		}))
		goldenForms(t, "upgrade-status-none", rollStatusJSON(rollout.Status{}))
	})
	t.Run("rotate-ca status", func(t *testing.T) {
		started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		goldenForms(t, "rotate-ca-status", rotationStatusJSON(rollout.RotationStatus{
			Target:  rollout.RotationTarget{ID: "0123456789abcdef", New: "etcdbox-ca-20260301-120000", Started: started, By: "ops@host"},
			Running: true,
			Nodes: []rollout.RotationRecord{
				{Name: "n1", ID: "0123456789abcdef", Phase: nodeapi.RotationReissue, State: rollout.StateDone, Updated: started.Add(time.Minute)},
				{Name: "n2", ID: "0123456789abcdef", Phase: nodeapi.RotationReissue, State: rollout.StateFailed, Error: "not in effect within 10m0s", Updated: started.Add(2 * time.Minute)},
			},
		}))
	})
	t.Run("version", func(t *testing.T) {
		v := versionInfo{Version: "v0.9.0", EtcdClient: "3.6.5", Go: "go1.26.0", OS: "linux", Arch: "amd64"}
		goldenForms(t, "version", v)
		assert.Equal(t, "etcdbox v0.9.0 (etcd client 3.6.5, go1.26.0, linux/amd64)", v.String())
		assert.Equal(t, versionString(), buildVersion().String())
	})
}

// TestOutputFlag: -o takes table, json or yaml; anything else is a usage
// error naming the value and the choices, and emit prints no table.
func TestOutputFlag(t *testing.T) {
	for _, f := range outputFormats {
		assert.NoError(t, checkOutput(f), f)
	}
	err := checkOutput("xml")
	assert.EqualError(t, err, `-o "xml": want one of table, json, yaml`)
	assert.Equal(t, exitUsage, exitCode(err))
	var b bytes.Buffer
	assert.Error(t, emit(&b, "table", struct{}{}))
	assert.Error(t, emit(&b, "xml", struct{}{}))
	assert.Empty(t, b.String())

	_, err = runCLI(t, "version", "-o", "xml")
	assert.ErrorContains(t, err, `-o "xml": want one of table, json, yaml`)
	assert.Equal(t, exitUsage, exitCode(err))
	out, err := runCLI(t, "version", "-o", "yaml")
	require.NoError(t, err)
	assert.Contains(t, out, "version: ")
	assert.Contains(t, out, "etcdClient: ")
}
