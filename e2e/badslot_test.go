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
	// reason is what the node API's last rollback says (a regexp).
	reason string
}

// oneNodeBadSlots are the bad images that fail on the node itself, before
// any gate can see them; a broken etcd, which the gate catches, is rolled
// through the cluster in TestRollingUpgrade.
var oneNodeBadSlots = []badSlot{
	{"missing virtio_blk fails the init", "bad-nomod.tar", "etcdbox: fatal: ", "", `slot a: bad, no reason recorded .*; its last boot never mounted the ESP`},
	{"panicking command line", "bad-panic.tar", "Kernel panic", "rdinit=/nonexistent", `slot a: bad, no reason recorded .*; its last boot never mounted the ESP`},
	{"hung init: the watchdog resets", "bad-hang.tar", "test hook: hanging before start etcd", "etcdbox.test.hang=start-etcd", `slot a: bad, no reason recorded .*; its last boot reached "start etcd"$`},
	{"crashed init: the kernel panics", "bad-crash.tar", "Attempted to kill init", "etcdbox.test.crash=start-etcd", `slot a: bad, no reason recorded .*; its last boot reached "start etcd"$`},
}

// buildOneNodeBadSlots builds the images of oneNodeBadSlots into dir.
func buildOneNodeBadSlots(t *testing.T, initBin, dir string) {
	t.Helper()
	drivers := slices.DeleteFunc(slices.Clone(image.DefaultDrivers), func(d string) bool { return d == "virtio_blk" })
	require.Len(t, drivers, len(image.DefaultDrivers)-1, "the default set names virtio_blk")
	buildBadImage(t, initBin, "e2e-bad-nomod", filepath.Join(dir, "bad-nomod.tar"), drivers, "")
	buildBadImage(t, initBin, "e2e-bad-panic", filepath.Join(dir, "bad-panic.tar"), nil, "rdinit=/nonexistent")
	// The test-hook init hangs, or exits, before it starts etcd.
	buildBadImage(t, initBin, "e2e-bad-hang", filepath.Join(dir, "bad-hang.tar"), nil, "etcdbox.test.hang=start-etcd")
	buildBadImage(t, initBin, "e2e-bad-crash", filepath.Join(dir, "bad-crash.tar"), nil, "etcdbox.test.crash=start-etcd")
}

// testBadSlot stages tt's image into slot a of the one node of c, which
// runs version on slot b, blessed, with one try per new slot; reboots it;
// and checks that the node tried slot a once, failed as tt says, came
// back on slot b by itself, and says why.
func testBadSlot(t *testing.T, c *cluster.Cluster, dir, version string, tt badSlot) {
	node := c.Nodes()[0]
	api := nodeAPI(t, c, node)
	vm, err := c.VM(node.Name)
	require.NoError(t, err)
	ref := pushImage(t, c, filepath.Join(dir, tt.image))
	stageAndWait(t, api, ref)
	mark := vm.Mark()
	start := time.Now()
	require.NoError(t, api.Reboot(t.Context()))

	ctx, cancel := context.WithTimeout(t.Context(), badSlotDeadline)
	defer cancel()
	assertTriedOnce(ctx, t, vm, mark, tt)

	st := waitHealthy(ctx, t, api)
	t.Logf("%s: reboot to a healthy voter on the old slot in %s", tt.name, time.Since(start).Round(time.Second))
	assert.Equal(t, "b", st.Slot, "the node runs the old slot")
	assert.True(t, st.Blessed, "the old slot is still blessed")
	assert.Equal(t, version, st.Version)
	assert.Equal(t, nodeapi.SlotBad, slotState(st, "a"), "the bad slot is given up: %+v", st.Slots)
	assert.Regexp(t, regexp.MustCompile("^"+tt.reason), st.LastRollback, "the node API says why")
}

// assertTriedOnce checks vm's console after from: the reboot tried slot a
// once, with tt's options, failed as tt says, and the firmware booted the
// old slot b next, with its own command line; after a hang, the watchdog
// reset the machine.
func assertTriedOnce(ctx context.Context, t *testing.T, vm *qemu.VM, from int64, tt badSlot) {
	t.Helper()
	try, err := vm.WaitConsole(ctx, from, "Command line: ")
	require.NoError(t, err)
	assert.Contains(t, try.Line, "etcdbox.slot=a", "the reboot tried the new slot")
	assert.Contains(t, try.Line, tt.options, "the image's extras are on its slot's command line")
	f, err := vm.WaitConsole(ctx, try.Next, tt.failure)
	require.NoError(t, err, "console:\n%s", vm.ConsoleTail(40))
	t.Logf("bad slot failed: %s", qemu.Printable(f.Line))
	old, err := vm.WaitConsole(ctx, f.Next, "Command line: ")
	require.NoError(t, err, "console:\n%s", vm.ConsoleTail(40))
	assert.Contains(t, old.Line, "etcdbox.slot=b", "the firmware booted the old slot next")
	if tt.options != "" {
		assert.NotContains(t, old.Line, tt.options, "the old slot keeps its own command line")
	}
	if strings.Contains(tt.options, "hang") {
		// Between the hang and the next boot: the watchdog left unfed,
		// and no shutdown, rollback or restart of the init's or the
		// kernel's: the watchdog reset the machine.
		between := vm.Console()[f.Next:old.Offset]
		assert.Contains(t, between, "watchdog: not feeding")
		for _, s := range []string{"shutdown", "rolled back", "reboot:", "Kernel panic"} {
			assert.NotContains(t, between, s, "between the hang and the next boot")
		}
	}
}
