package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// Deadlines of TestRollback under software emulation.
const (
	// stageDeadline bounds a pull and a slot write.
	stageDeadline = 2 * time.Minute
	// badBootDeadline bounds the reboot until the bad slot's kernel starts.
	badBootDeadline = 2 * time.Minute
	// backDeadline bounds a bad slot's boot until the node is healthy on
	// its old slot: the failure (up to the init's 30 s ESP and DATA
	// waits, or panic=10), a firmware reset, and a boot of the old slot.
	backDeadline = 4 * time.Minute
)

// buildBadImage builds an OCI tarball at out from the default inputs with
// cfg's Drivers and Cmdline.
func buildBadImage(t *testing.T, initBin, version, out string, drivers []string, cmdline string) {
	t.Helper()
	vmlinuz, modules := testenv.Kernel(t)
	_, err := image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules, Etcd: testenv.Bin(t, "etcd"), Init: initBin,
		Drivers: drivers, Cmdline: cmdline, Format: image.FormatOCI, Output: out, Version: version,
	})
	require.NoError(t, err)
}

// TestRollback stages two images that cannot boot on one node and checks
// that each time the node comes back on its old slot by itself, healthy,
// with the new slot bad: (a) an initramfs without virtio_blk, whose init
// finds neither the ESP nor DATA and reboots; (b) a kernel command line
// whose init does not exist, so the kernel panics and panic=10 reboots.
// The seed allows one try, so the firmware's next boot is the old slot.
func TestRollback(t *testing.T) {
	if testing.Short() {
		t.Skip("QEMU tier: runs in make test, not in go test -short")
	}
	dir := t.TempDir()
	initBin := buildInit(t)
	v1img, nomod, panics := filepath.Join(dir, "v1.img"), filepath.Join(dir, "nomod.tar"), filepath.Join(dir, "panic.tar")
	buildRollImage(t, initBin, testenv.Bin(t, "etcd"), "e2e-v1", v1img)
	drivers := slices.DeleteFunc(slices.Clone(image.DefaultDrivers), func(d string) bool { return d == "virtio_blk" })
	require.Len(t, drivers, len(image.DefaultDrivers)-1, "the default set names virtio_blk")
	buildBadImage(t, initBin, "e2e-nomod", nomod, drivers, "")
	buildBadImage(t, initBin, "e2e-panic", panics, nil, "rdinit=/nonexistent")

	code, vars := testenv.OVMF(t)
	ctx, cancel := context.WithTimeout(context.Background(), clusterDeadline)
	c, err := cluster.Up(ctx, cluster.Config{
		Dir: filepath.Join(dir, "c"), Image: v1img, OVMFCode: code, OVMFVars: vars, MemoryMiB: 768, Log: t.Logf,
		Upgrade: cluster.Upgrade{Tries: 1, Settle: 10 * time.Second, Gate: time.Minute},
	}, 1)
	cancel()
	if c != nil {
		t.Cleanup(func() {
			if t.Failed() {
				for _, node := range c.Nodes() {
					if vm, err := c.VM(node.Name); err == nil {
						t.Logf("console of %s (last 120 lines):\n%s", node.Name, vm.ConsoleTail(120))
					}
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := c.Down(ctx, 30*time.Second); err != nil {
				t.Errorf("down: %v", err)
			}
		})
	}
	require.NoError(t, err)
	require.Len(t, c.Nodes(), 1)
	node := c.Nodes()[0]
	vm, err := c.VM(node.Name)
	require.NoError(t, err)
	api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(node.APIPort), c.PKIDir())
	require.NoError(t, err)
	t.Cleanup(api.Close)

	st, err := api.Status(t.Context())
	require.NoError(t, err)
	require.Equal(t, "a", st.Slot)
	require.True(t, st.Blessed, "the first slot is blessed")

	tests := []struct {
		name, image string
		// failure is what the console shows when the bad slot fails.
		failure []string
		// options must be on the bad slot's kernel command line.
		options string
	}{
		{"missing virtio_blk", nomod, []string{"etcdbox: fatal: "}, ""},
		{"panicking command line", panics, []string{"Kernel panic"}, "rdinit=/nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := pushImage(t, c, tt.image)
			stageAndWait(t, api, ref)
			st, err := api.Status(t.Context())
			require.NoError(t, err)
			assert.Equal(t, nodeapi.SlotTrying, slotState(st, "b"), "slot b waits for its try: %+v", st.Slots)

			mark := vm.Mark()
			require.NoError(t, api.Reboot(t.Context()))
			ctx, cancel := context.WithTimeout(t.Context(), badBootDeadline)
			m, err := vm.WaitConsole(ctx, mark, "Command line: ")
			cancel()
			require.NoError(t, err)
			require.Contains(t, m.Line, "etcdbox.slot=b", "the reboot tries the new slot")
			assert.Contains(t, m.Line, tt.options, "the image's extras are on its slot's command line")
			badBoot := time.Now()
			t.Logf("bad slot booting: %s", m.Line)

			ctx, cancel = context.WithTimeout(t.Context(), backDeadline)
			defer cancel()
			f, err := vm.WaitConsole(ctx, m.Next, tt.failure...)
			require.NoError(t, err)
			t.Logf("bad slot fails after %s: %s", time.Since(badBoot).Round(time.Second), qemu.Printable(f.Line))
			old, err := vm.WaitConsole(ctx, f.Next, "Command line: ")
			require.NoError(t, err)
			assert.Contains(t, old.Line, "etcdbox.slot=a", "the firmware boots the old slot next")
			assert.NotContains(t, old.Line, "rdinit=", "the old slot keeps its own command line")
			_, err = vm.WaitConsole(ctx, old.Next, "etcdbox: etcd ready")
			require.NoError(t, err)
			etcdReady := time.Since(badBoot)

			st = waitHealthy(ctx, t, api)
			healthy := time.Since(badBoot)
			t.Logf("%s: from the bad slot's boot to the old slot: etcd ready after %s, healthy in the node API after %s",
				tt.name, etcdReady.Round(100*time.Millisecond), healthy.Round(100*time.Millisecond))
			assert.Equal(t, "a", st.Slot, "back on the old slot")
			assert.True(t, st.Blessed, "the old slot is still blessed")
			assert.Equal(t, "e2e-v1", st.Version)
			assert.Equal(t, nodeapi.SlotBlessed, slotState(st, "a"), "%+v", st.Slots)
			assert.Equal(t, nodeapi.SlotBad, slotState(st, "b"), "%+v", st.Slots)
			assert.Regexp(t, `^slot b: `, st.LastRollback)
			t.Logf("last rollback: %s", st.LastRollback)
		})
	}
}

// stageAndWait stages ref through the node API and waits until it is staged.
func stageAndWait(t *testing.T, api *nodeapi.Client, ref string) {
	t.Helper()
	require.NoError(t, api.StageUpgrade(t.Context(), ref))
	deadline := time.Now().Add(stageDeadline)
	for {
		p, err := api.Upgrade(t.Context())
		require.NoError(t, err)
		if p.Target == ref && p.Phase == nodeapi.PhaseStaged {
			return
		}
		require.NotEqual(t, nodeapi.PhaseFailed, p.Phase, "staging %s: %s", ref, p.Error)
		require.True(t, time.Now().Before(deadline), "staging %s: still %s after %s", ref, p.Phase, stageDeadline)
		time.Sleep(time.Second) // polling interval, bounded by the deadline
	}
}

// waitHealthy polls the node API until the node's member is a healthy
// voter, and returns that status.
func waitHealthy(ctx context.Context, t *testing.T, api *nodeapi.Client) nodeapi.Status {
	t.Helper()
	for {
		st, err := api.Status(ctx)
		if err == nil && st.Member.Healthy && st.Member.Role == nodeapi.RoleVoter {
			return st
		}
		if ctx.Err() != nil {
			require.FailNow(t, "node not healthy in time", "last status %+v, error %v", st, err)
		}
		time.Sleep(500 * time.Millisecond) // polling interval, bounded by ctx
	}
}

// slotState is the state of slot name in st, "" when st does not list it.
func slotState(st nodeapi.Status, name string) string {
	for _, s := range st.Slots {
		if s.Name == name {
			return s.State
		}
	}
	return ""
}
