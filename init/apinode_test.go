package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/upgrade"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/seed"
)

func TestSaveSnapshotKeepsTheNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var last nodeapi.Snapshot
	for i := range nodeapi.SnapshotsKept + 3 {
		var err error
		last, err = saveSnapshot(dir, strings.NewReader(fmt.Sprint("snapshot ", i)), int64(i), start.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "etcd-crashed.db.tmp"), nil, 0o600))
	require.NoError(t, pruneSnapshots(dir, nodeapi.SnapshotsKept))
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Len(t, names, nodeapi.SnapshotsKept, "files %v", names)
	assert.Equal(t, filepath.Base(last.Path), names[len(names)-1])
	b, err := os.ReadFile(last.Path)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint("snapshot ", nodeapi.SnapshotsKept+2), string(b))
	assert.Equal(t, int64(len(b)), last.Size)
	assert.Equal(t, int64(nodeapi.SnapshotsKept+2), last.Revision)
}

func TestLastRollback(t *testing.T) {
	esp := slot.Dir(t.TempDir())
	require.NoError(t, os.MkdirAll(filepath.Join(string(esp), "etcdbox"), 0o755))
	bad := slot.State{Slots: map[string]slot.Slot{
		"a": {Entry: &slot.Entry{Name: slot.Name{}}},
		"b": {Entry: &slot.Entry{Name: slot.Name{Counted: true, Left: 0, Done: 3}}},
	}}
	require.Equal(t, slot.Bad, bad.Slots["b"].Status(), "test setup: slot b is bad")
	assert.Equal(t, "slot b: bad, no reason recorded (kernel panic, hang or crash loop); its last boot never mounted the ESP (the kernel, a missing disk driver, or the init before that step)", slot.LastRollback(esp, bad, "a"))
	require.NoError(t, esp.WriteFile(slot.ReachedRecord("b"), strings.NewReader("start etcd\n")))
	assert.Equal(t, `slot b: bad, no reason recorded (kernel panic, hang or crash loop); its last boot reached "start etcd"`, slot.LastRollback(esp, bad, "a"))
	require.NoError(t, esp.WriteFile(slot.FailedRecord("b"), strings.NewReader("gate failed: not a voting member after 120s\n")))
	assert.Equal(t, "slot b: gate failed: not a voting member after 120s", slot.LastRollback(esp, bad, "a"))
	assert.Empty(t, slot.LastRollback(esp, bad, "b"), "the booted slot is not a rollback")
	assert.Empty(t, slot.LastRollback(esp, bad, ""), "no slots in container mode")
}

// TestStageUpgradeAllowlist: with upgrade.registries set, a reference to
// another registry is refused at once, before any network traffic (the
// registry named here does not exist), and nothing starts to stage.
func TestStageUpgradeAllowlist(t *testing.T) {
	n := &node{log: console.New(), esp: slot.Dir(t.TempDir()), seed: &seed.Seed{}}
	n.seed.Upgrade.Registries = []string{"10.88.0.1:5000"}
	a := &apiNode{n: n}
	err := a.StageUpgrade(t.Context(), "evil.invalid/etcdbox@sha256:"+strings.Repeat("a", 64), false)
	require.ErrorIs(t, err, server.ErrRefused)
	assert.ErrorIs(t, err, upgrade.ErrRegistryNotAllowed)
	assert.Contains(t, err.Error(), "evil.invalid is not in the seed's upgrade.registries")
	assert.Equal(t, nodeapi.PhaseIdle, a.Upgrade().Phase, "staging started")

	err = a.StageUpgrade(t.Context(), "10.88.0.1:5000/etcdbox:latest", true)
	require.ErrorIs(t, err, server.ErrBadRequest, "a tag, not a digest")
	assert.Equal(t, nodeapi.PhaseIdle, a.Upgrade().Phase)
}
