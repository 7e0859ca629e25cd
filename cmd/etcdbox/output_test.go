package main

import (
	"bytes"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

var update = flag.Bool("update", false, "rewrite the golden files of the -o json forms")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(p, got, 0o644))
	}
	want, err := os.ReadFile(p)
	require.NoError(t, err, "go test ./cmd/etcdbox -run TestJSONGolden -update writes it")
	assert.Equal(t, string(want), string(got), "the JSON of %s changed: fields may be added, never renamed or removed", name)
}

// TestJSONGolden pins the -o json form of every command that prints
// state, on fixed input.
func TestJSONGolden(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	t.Run("status", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, printNodeStatusJSON(&b, []statusResult{
			{target: statusTarget{name: "n1", endpoint: "https://127.0.0.1:4002"}, status: nodeapi.Status{
				Name: "n1", Cluster: "etcdbox", Version: "v2", EtcdVersion: "3.7.3", Kernel: "6.1.0-57-amd64", Slot: "b", Blessed: true,
				Slots:      []nodeapi.Slot{{Name: "a", Generation: 1, State: nodeapi.SlotBlessed}, {Name: "b", Generation: 2, State: nodeapi.SlotBlessed}},
				Member:     nodeapi.Member{ID: "8e9e05c52164694d", ClusterID: "cdf818194e3a8c32", Role: nodeapi.RoleVoter, Leader: true, Healthy: true},
				CertExpiry: at, Uptime: 26*time.Hour + 3*time.Minute, Upgrade: nodeapi.UpgradeProgress{Phase: nodeapi.PhaseIdle},
			}},
			{target: statusTarget{name: "n2", endpoint: "https://127.0.0.1:4004"}, err: errors.New("dial tcp 127.0.0.1:4004: connect: connection refused")},
		}))
		golden(t, "status.json", b.Bytes())
	})
	t.Run("cluster status", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, writeJSON(&b, clusterStatusJSON([]cluster.NodeStatus{
			{Node: cluster.Node{Name: "n1", IP: netip.MustParseAddr("10.88.0.11"), ClientPort: 4001}, Running: true, State: "running",
				MemberStatus: cluster.MemberStatus{MemberID: 0x8e9e05c52164694d, Leader: true, Health: "healthy"}, Slot: "a"},
			{Node: cluster.Node{Name: "n2", IP: netip.MustParseAddr("10.88.0.12"), NextIP: netip.MustParseAddr("10.88.0.52"), ClientPort: 4003},
				State: "stopped", MemberStatus: cluster.MemberStatus{Health: "not running"}, Slot: "-"},
		})))
		golden(t, "cluster-status.json", b.Bytes())
	})
	t.Run("upgrade status", func(t *testing.T) {
		var b bytes.Buffer
		ref := "10.88.0.1:5000/etcdbox@sha256:755915b7bcd1f377de5a1d91a0b1e0ff742c6467b1b5deb422de83a299500465"
		require.NoError(t, writeJSON(&b, rollStatusJSON(rollout.Status{
			Target: &rollout.Target{Image: ref, Started: at, By: "ops@laptop", Etcd: "3.7.3"},
			Records: []rollout.NodeRecord{
				{Name: "n1", Image: ref, State: rollout.StateDone, From: "a", To: "b", Snapshot: "/var/lib/etcdbox/backups/etcd-1.db", Started: at, Updated: at.Add(2 * time.Minute)},
				{Name: "n2", Image: ref, State: rollout.StateRolledBack, From: "a", To: "b", Error: "slot b: gate failed", Started: at, Updated: at.Add(5 * time.Minute)},
			},
		})))
		golden(t, "upgrade-status.json", b.Bytes())
		b.Reset()
		require.NoError(t, writeJSON(&b, rollStatusJSON(rollout.Status{})))
		assert.Equal(t, "{\n  \"target\": null,\n  \"nodes\": []\n}\n", b.String(), "no roll recorded")
	})
	t.Run("members list", func(t *testing.T) {
		var b bytes.Buffer
		require.NoError(t, printMembersJSON(&b, rollout.Membership{
			Members: []rollout.MemberState{
				{ID: 0x8e9e05c52164694d, Name: "n1", PeerURLs: []string{"https://n1.etcdbox.internal:2380"}, ClientURLs: []string{"https://n1.etcdbox.internal:2379"}, Healthy: true, Version: "3.7.3"},
				{ID: 0x91bc3c398fb3c146, Learner: true, PeerURLs: []string{"https://n4.etcdbox.internal:2380"}, Problem: "not started"},
			},
			Leader: 0x8e9e05c52164694d,
		}))
		golden(t, "members.json", b.Bytes())
	})
}
