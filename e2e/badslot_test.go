package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// badSlotDeadline bounds one bad slot on one node, under software
// emulation: the reboot into it, its failure (the init waits 30 s for the
// ESP and 30 s for DATA; the watchdog 30 s), and the firmware's boot of
// the old slot until it is a healthy voter.
const badSlotDeadline = 5 * time.Minute

// A badSlot is an image that must fail its first boot, and what that
// failure looks like.
type badSlot struct {
	name, image string
	// failure is what the bad slot's console shows when it fails.
	failure string
	// options must be on the bad slot's kernel command line.
	options string
	// reason is what the node API's last rollback says after "slot X: ",
	// X the bad slot (a regexp).
	reason string
}

// oneNodeBadSlots are the bad images that fail on the node itself, before
// any gate can see them; a broken etcd, which the gate catches, is rolled
// through the cluster in TestRollingUpgrade.
var oneNodeBadSlots = []badSlot{
	{"missing virtio_blk fails the init", "bad-nomod.tar", "etcdbox: fatal: ", "", `bad, no reason recorded .*; its last boot never mounted the ESP`},
	{"panicking command line", "bad-panic.tar", "Kernel panic", "rdinit=/nonexistent", `bad, no reason recorded .*; its last boot never mounted the ESP`},
	{"hung init: the watchdog resets", "bad-hang.tar", "test hook: hanging before start etcd", "etcdbox.test.hang=start-etcd", `bad, no reason recorded .*; its last boot reached "start etcd"$`},
	{"crashed init: the kernel panics", "bad-crash.tar", "Attempted to kill init", "etcdbox.test.crash=start-etcd", `bad, no reason recorded .*; its last boot reached "start etcd"$`},
	// The new init hangs before it loads its modules, so nothing in the
	// new kernel touches the watchdog (i6300esb's probe would stop it):
	// only the timer the old kernel left running through the jump can
	// reset the machine. The old kernel stopped it in the jump's restart
	// notifiers until the init loaded the watchdog core with
	// stop_on_reboot=0 (init/modules.go).
	{"init hung before its modules: the watchdog left armed for the jump resets", "bad-hang-early.tar", "test hook: hanging before load watchdog driver", "etcdbox.test.hang=load-watchdog-driver", `bad, no reason recorded .*; its last boot never mounted the ESP`},
}

// buildOneNodeBadSlots builds the images of oneNodeBadSlots into dir.
func buildOneNodeBadSlots(t *testing.T, initBin, dir string) {
	t.Helper()
	drivers := slices.DeleteFunc(slices.Clone(image.DefaultDrivers), func(d string) bool { return d == "virtio_blk" })
	require.Len(t, drivers, len(image.DefaultDrivers)-1, "the default set names virtio_blk")
	buildBadImage(t, initBin, "e2e-bad-nomod", filepath.Join(dir, "bad-nomod.tar"), drivers, "")
	buildBadImage(t, initBin, "e2e-bad-panic", filepath.Join(dir, "bad-panic.tar"), nil, "rdinit=/nonexistent")
	// The test-hook init hangs, or exits, before it starts etcd, or
	// hangs before it loads its modules.
	buildBadImage(t, initBin, "e2e-bad-hang", filepath.Join(dir, "bad-hang.tar"), nil, "etcdbox.test.hang=start-etcd")
	buildBadImage(t, initBin, "e2e-bad-crash", filepath.Join(dir, "bad-crash.tar"), nil, "etcdbox.test.crash=start-etcd")
	buildBadImage(t, initBin, "e2e-bad-hang-early", filepath.Join(dir, "bad-hang-early.tar"), nil, "etcdbox.test.hang=load-watchdog-driver")
}

// TestBadSlots boots one node on v1 with one try per new slot, then
// stages each image of oneNodeBadSlots into its other slot in turn and
// reboots it: each is tried once and given up, and the node comes back on
// v1 by itself and says why. One node, because the rollback is the node's
// own, and one VM boots three times as fast as one of three.
func TestBadSlots(t *testing.T) {
	// One VM, after the cluster tests (e2e/schedule_test.go).
	oneVMTest(t, laneSlots)
	dir := t.TempDir()
	initBin := buildInit(t)
	v1img := filepath.Join(dir, "v1.img")
	buildRollImage(t, initBin, "", "e2e-v1", v1img)
	buildOneNodeBadSlots(t, initBin, dir)
	c := startCluster(t, cluster.Config{
		Dir: filepath.Join(dir, "c"), Image: v1img,
		Upgrade: cluster.Upgrade{Tries: 1, Settle: 10 * time.Second, Gate: time.Minute},
	}, 1).Cluster
	require.Len(t, c.Nodes(), 1)
	st, err := nodeAPI(t, c, c.Nodes()[0]).Status(t.Context())
	require.NoError(t, err)
	require.Equal(t, "a", st.Slot)
	require.True(t, st.Blessed, "the first slot is blessed")
	for _, tt := range oneNodeBadSlots {
		if !t.Run(tt.name, func(t *testing.T) { testBadSlot(t, c, dir, "e2e-v1", tt) }) {
			return
		}
	}
}

// testBadSlot stages tt's image into the other slot of the one node of
// c, which runs version on a blessed slot, with one try per new slot;
// reboots it; and checks that the node tried the new slot once, failed as
// tt says, came back on its old slot by itself, and says why.
func testBadSlot(t *testing.T, c *cluster.Cluster, dir, version string, tt badSlot) {
	node := c.Nodes()[0]
	api := nodeAPI(t, c, node)
	vm, err := c.VM(node.Name)
	require.NoError(t, err)
	st, err := api.Status(t.Context())
	require.NoError(t, err)
	old, tried := st.Slot, otherSlot(st.Slot)
	ref := pushImage(t, c, filepath.Join(dir, tt.image))
	stageAndWait(t, api, ref)
	mark := vm.Mark()
	start := time.Now()
	require.NoError(t, api.Reboot(t.Context()))

	ctx, cancel := context.WithTimeout(t.Context(), badSlotDeadline)
	defer cancel()
	assertTriedOnce(ctx, t, vm, mark, tried, old, tt)

	st = waitHealthy(ctx, t, api)
	t.Logf("%s: reboot to a healthy voter on the old slot in %s", tt.name, time.Since(start).Round(time.Second))
	assert.Equal(t, old, st.Slot, "the node runs the old slot")
	assert.True(t, st.Blessed, "the old slot is still blessed")
	assert.Equal(t, version, st.Version)
	assert.Equal(t, nodeapi.SlotBad, slotState(st, tried), "the bad slot is given up: %+v", st.Slots)
	assert.Regexp(t, regexp.MustCompile("^slot "+tried+": "+tt.reason), st.LastRollback, "the node API says why")
}

// otherSlot is the A/B slot that is not s.
func otherSlot(s string) string {
	if s == "a" {
		return "b"
	}
	return "a"
}

// assertTriedOnce checks vm's console after from: the reboot jumped into
// slot tried with kexec and tried it once, with tt's options, failed as tt says, and the firmware
// booted the old slot next, with its own command line; after a hang, the
// watchdog reset the machine.
func assertTriedOnce(ctx context.Context, t *testing.T, vm *qemu.VM, from int64, tried, old string, tt badSlot) {
	t.Helper()
	try, err := vm.WaitConsole(ctx, from, "Command line: ")
	require.NoError(t, err)
	assert.Contains(t, try.Line, "etcdbox.slot="+tried, "the reboot tried the new slot")
	// The old slot's init jumped into the new one with kexec, after it
	// counted the try as systemd-boot would: the firmware, booted by the
	// failure, then sees no try left (one try per slot here).
	assert.Regexp(t, `reboot: kexec into slot `+tried+`, its try counted as systemd-boot counts it \(etcdbox-`+tried+`\+1\.conf -> etcdbox-`+tried+`\+0-1\.conf\)`,
		vm.Console()[from:try.Offset], "the reboot into the armed slot is a kexec")
	assert.Contains(t, vm.Console()[from:try.Offset], "etcdbox: network: eth0 down before the kexec", "the NIC went down before the jump")
	assert.Contains(t, try.Line, tt.options, "the image's extras are on its slot's command line")
	f, err := vm.WaitConsole(ctx, try.Next, tt.failure)
	require.NoError(t, err, "console:\n%s", vm.ConsoleTail(40))
	t.Logf("bad slot failed: %s", qemu.Printable(f.Line))
	next, err := vm.WaitConsole(ctx, f.Next, "Command line: ")
	require.NoError(t, err, "console:\n%s", vm.ConsoleTail(40))
	assert.Contains(t, next.Line, "etcdbox.slot="+old, "the firmware booted the old slot next")
	if tt.options != "" {
		assert.NotContains(t, next.Line, tt.options, "the old slot keeps its own command line")
	}
	if strings.Contains(tt.options, "hang") {
		// Between the hang and the next boot: the watchdog left unfed,
		// and no shutdown, rollback or restart of the init's or the
		// kernel's: the watchdog reset the machine.
		between := vm.Console()[f.Next:next.Offset]
		if strings.Contains(tt.options, "hang=load-watchdog-driver") {
			// The new init never opened it: the old kernel's init
			// left it armed, and it ran on through the jump.
			assert.Contains(t, vm.Console()[from:try.Offset], "left armed for the next kernel")
			assert.NotContains(t, between, "watchdog: not feeding")
		} else {
			assert.Contains(t, between, "watchdog: not feeding")
		}
		for _, s := range []string{"shutdown", "rolled back", "reboot:", "Kernel panic"} {
			assert.NotContains(t, between, s, "between the hang and the next boot")
		}
	}
	// The old slot's init armed the watchdog before it loaded the drivers
	// other than the watchdog's, so that a probe that hangs is reset.
	mods, err := vm.WaitConsole(ctx, next.Next, "etcdbox: load kernel modules: done")
	require.NoError(t, err, "console:\n%s", vm.ConsoleTail(40))
	assert.Contains(t, vm.Console()[next.Next:mods.Offset], "etcdbox: watchdog /dev/watchdog armed", "the watchdog armed before the coldplug")
}
