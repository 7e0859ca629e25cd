package e2e

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/seed"
)

// Deadlines of TestPowerCutDuringStaging under software emulation.
const (
	// stageDeadline bounds a pull and a slot write.
	stageDeadline = 2 * time.Minute
	// cutDeadline bounds the staging until the agent writes the slot.
	cutDeadline = time.Minute
	// cutPoll is the polling interval of the agent's phase before the
	// cut: short, so that the cut lands inside the write.
	cutPoll = 50 * time.Millisecond
	// resumeDeadline bounds a boot of the node's own disk after the cut
	// until it is a healthy voter again.
	resumeDeadline = 3 * time.Minute
	// upgradeBootDeadline bounds the reboot into the staged slot until it
	// is healthy and blessed (the gate's settle time included).
	upgradeBootDeadline = 3 * time.Minute
)

// TestPowerCutDuringStaging cuts the power (QMP quit) of a node while its
// agent writes v2 into the inactive slot, boots the node again on the same
// disk, and checks that it comes back on its old slot with the new one not
// bootable; then it stages v2 again, reboots, and checks that the node
// ends on the new slot, blessed; then it cuts the power right after the
// bless and checks that the blessed entry is whole on the disk. (The images that fail their first boot
// are TestBadSlots'.)
//
// The node boots with its seed, CA key included, on the kernel command
// line: neither the console (the kernel's own prints of its command line
// aside), nor the node API's log, nor the entry staged for v2 holds a
// piece of the key or of the etcdbox.seed= value.
func TestPowerCutDuringStaging(t *testing.T) {
	// One VM, after the cluster tests (e2e/schedule_test.go).
	oneVMTest(t, lanePower)
	dir := t.TempDir()
	initBin := buildInit(t)
	v1img, v2 := filepath.Join(dir, "v1.img"), filepath.Join(dir, "v2.tar")
	// v1 carries the cluster's seed, CA key included, on its kernel
	// command line (the seed volume holds the same seed, read only when
	// the command line has none): the console, the node API's log and the
	// entry the agent stages for v2 never show it.
	cdir := filepath.Join(dir, "c")
	up := cluster.Upgrade{Tries: 1, Settle: 10 * time.Second, Gate: time.Minute}
	cfg := cluster.Config{Dir: cdir, Image: v1img, Upgrade: up}
	seedYAML, err := cluster.Seed(cfg, 1)
	require.NoError(t, err)
	secrets := newCmdlineSecrets(t, seedYAML)
	buildImageCmdline(t, initBin, "", "e2e-v1", secrets.arg, v1img)
	buildRollImage(t, initBin, "", "e2e-v2", v2)

	rc := startCluster(t, cfg, 1)
	c := rc.Cluster
	require.Len(t, c.Nodes(), 1)
	node := c.Nodes()[0]
	vm, err := c.VM(node.Name)
	require.NoError(t, err)
	api := nodeAPI(t, c, node)

	st, err := api.Status(t.Context())
	require.NoError(t, err)
	require.Equal(t, "a", st.Slot)
	require.True(t, st.Blessed, "the first slot is blessed")
	require.Equal(t, "e2e-v1", st.Version)
	_, err = vm.WaitConsole(t.Context(), 0, "seed: from kernel command line")
	require.NoError(t, err, "the node took its seed from the command line")
	logs, err := api.Logs(t.Context(), 0)
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	secrets.assertAbsent(t, "/v1/logs of the first boot", strings.Join(logs, "\n"))

	// Stage v2 and cut the power while the agent writes the slot.
	ref := pushImage(t, c, v2)
	require.NoError(t, api.StageUpgrade(t.Context(), ref))
	staging := time.Now()
	var seen []string
	for {
		p, err := api.Upgrade(t.Context())
		require.NoError(t, err)
		if len(seen) == 0 || seen[len(seen)-1] != p.Phase {
			seen = append(seen, p.Phase)
		}
		if p.Target == ref && p.Phase == nodeapi.PhaseWriting {
			break
		}
		require.NotContains(t, []string{nodeapi.PhaseStaged, nodeapi.PhaseFailed}, p.Phase,
			"staging ended before the cut (phases %v): %s", seen, p.Error)
		require.True(t, time.Now().Before(staging.Add(cutDeadline)), "not writing after %s (phases %v)", cutDeadline, seen)
		time.Sleep(cutPoll) // polling interval, bounded by cutDeadline
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	require.NoError(t, vm.Quit(ctx))
	require.NoError(t, vm.Wait(ctx))
	cancel()
	t.Logf("power cut %s after staging began, in phase %q (phases seen %v)",
		time.Since(staging).Round(time.Millisecond), nodeapi.PhaseWriting, seen)
	// The agent logs each phase, and the end of the write, on the console.
	console := vm.Console()
	secrets.assertAbsent(t, "the console before the cut", console)
	assert.Contains(t, console, "upgrade "+ref+": "+nodeapi.PhaseWriting, "the agent was writing")
	assert.NotContains(t, console, "staged in slot", "the cut came before the slot was staged")

	// Boot the node again on its disk: Up resumes the cluster's nodes
	// (the network and its registry still run in this process).
	ctx, cancel = context.WithTimeout(t.Context(), resumeDeadline)
	defer cancel()
	c, err = cluster.Up(ctx, cluster.Config{Dir: cdir, Log: t.Logf}, 0)
	if c != nil {
		rc.Cluster = c
	}
	require.NoError(t, err)
	node, ok := c.Node(node.Name)
	require.True(t, ok)
	vm, err = c.VM(node.Name)
	require.NoError(t, err)
	m, err := vm.WaitConsole(ctx, 0, "Command line: ")
	require.NoError(t, err)
	assert.Contains(t, m.Line, "etcdbox.slot=a", "after the cut the firmware boots the old slot")
	// The ESP was mounted read-write at the cut, so it is dirty; the init
	// repairs it before mounting it.
	_, err = vm.WaitConsole(ctx, m.Next, "fsck.fat repaired it")
	require.NoError(t, err)
	api = nodeAPI(t, c, node)
	st = waitHealthy(ctx, t, api)
	assert.Equal(t, "a", st.Slot, "back on the old slot")
	assert.True(t, st.Blessed, "the old slot is still blessed")
	assert.Equal(t, "e2e-v1", st.Version)
	assert.Equal(t, nodeapi.SlotBlessed, slotState(st, "a"), "%+v", st.Slots)
	assert.Contains(t, []string{"", nodeapi.SlotEmpty}, slotState(st, "b"), "the half-written slot is not bootable: %+v", st.Slots)
	t.Logf("after the cut: slot %s, version %s, slots %+v, agent %+v", st.Slot, st.Version, st.Slots, st.Upgrade)

	// The retried upgrade succeeds.
	retry := time.Now()
	stageAndWait(t, api, ref)
	t.Logf("retried staging done after %s", time.Since(retry).Round(time.Second))
	st, err = api.Status(t.Context())
	require.NoError(t, err)
	assert.Equal(t, nodeapi.SlotTrying, slotState(st, "b"), "slot b waits for its try: %+v", st.Slots)
	// The seed stays off the staged slot's entry (the node reads it from
	// its cache, or its seed volume, once it boots that slot), out of the
	// log of the boot that staged it, and off its console.
	entries := 0
	for p, f := range readESP(t, vm) {
		if !strings.HasPrefix(p, "loader/entries/") {
			continue
		}
		entries++
		if strings.HasPrefix(p, "loader/entries/etcdbox-a") {
			assert.Contains(t, string(f.data), secrets.arg, "%s: v1's own entry, as built, carries the seed", p)
			continue
		}
		secrets.assertAbsent(t, p, string(f.data))
		assert.NotContains(t, string(f.data), seed.CmdlineKey+"=", p)
	}
	assert.Equal(t, 2, entries, "an entry for each slot")
	logs, err = api.Logs(t.Context(), 0)
	require.NoError(t, err)
	secrets.assertAbsent(t, "/v1/logs of the boot that staged v2", strings.Join(logs, "\n"))
	mark := vm.Mark()
	require.NoError(t, api.Reboot(t.Context()))
	ctx, cancel = context.WithTimeout(t.Context(), upgradeBootDeadline)
	defer cancel()
	m, err = vm.WaitConsole(ctx, mark, "Command line: ")
	require.NoError(t, err)
	require.Contains(t, m.Line, "etcdbox.slot=b", "the reboot tries the new slot")
	assert.NotContains(t, m.Line, seed.CmdlineKey+"=", "slot b boots without the seed on its command line")
	st = waitBlessed(ctx, t, api, "b")
	assert.Equal(t, "e2e-v2", st.Version)
	assert.Equal(t, nodeapi.SlotBlessed, slotState(st, "b"), "%+v", st.Slots)
	assert.Equal(t, nodeapi.SlotBlessed, slotState(st, "a"), "the old slot stays the fallback: %+v", st.Slots)
	t.Logf("after the retry: slot %s, version %s, slots %+v, %s after the retry began",
		st.Slot, st.Version, st.Slots, time.Since(retry).Round(time.Second))
	secrets.assertAbsent(t, "the console after the cut", vm.Console())

	// A second cut right after the bless: the blessed entry is on the
	// disk whole. (vfat writes a renamed file's size and first cluster
	// only with the file's inode; before the slot package flushed the
	// renamed file, this read showed etcdbox-b.conf empty.)
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, vm.Quit(ctx))
	require.NoError(t, vm.Wait(ctx))
	esp := readESP(t, vm)
	blessed, ok := esp["loader/entries/etcdbox-b.conf"]
	require.True(t, ok, "slot b's blessed entry exists after the cut: %v", slices.Sorted(maps.Keys(esp)))
	assert.Contains(t, string(blessed.data), "etcdbox.slot=b", "slot b's blessed entry is whole after a cut right after the bless")
	for p := range esp {
		assert.NotRegexp(t, `^loader/entries/etcdbox-b\+`, p, "the counted entry is gone")
	}
}
