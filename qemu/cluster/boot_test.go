package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/qemu"
)

// TestSilentGuestFailsFast boots a node whose guest never runs a single
// instruction (QEMU started with -S, as on a host whose KVM opens but
// runs no guest code): up reports it by name within the silence bound,
// with the accelerator and what to try, and down does not wait out the
// ACPI grace for it.
func TestSilentGuestFailsFast(t *testing.T) {
	cfg := blankNode(t, &GuestSilence, 3*time.Second)
	cfg.QEMUArgs, cfg.Log = []string{"-S"}, t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	c, err := Up(ctx, cfg, 1)
	require.Error(t, err)
	t.Logf("up failed after %s: %v", time.Since(start).Round(10*time.Millisecond), err)
	assert.Contains(t, err.Error(), "n1: the VM wrote nothing to its console in 3s, so the guest never ran (accelerator: tcg (set by --accel tcg)); try --accel kvm or ETCDBOX_ACCEL=kvm")
	assert.Less(t, time.Since(start), 60*time.Second)
	require.NotNil(t, c)

	start = time.Now()
	require.NoError(t, c.Down(ctx, time.Minute))
	assert.Less(t, time.Since(start), 20*time.Second, "down waited for the ACPI power-off of a guest that never ran")
	_, err = qemu.Attach(filepath.Join(cfg.Dir, "n1"))
	assert.ErrorIs(t, err, qemu.ErrNotRunning)
}

// TestStuckBootIsResetOnce boots a node whose firmware finds nothing to
// boot, so that it prints but never gets to an init, as a guest stuck in
// its firmware or kernel does: the wait presses its reset button once,
// the firmware starts again, and the second miss fails the wait, naming
// the node and how its console ends.
func TestStuckBootIsResetOnce(t *testing.T) {
	cfg := blankNode(t, &BootLimit, 15*time.Second)
	var logs safeLog
	cfg.Log = logs.add(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c, err := Up(ctx, cfg, 1)
	require.Error(t, err)
	require.NotNil(t, c)
	t.Cleanup(func() { _ = c.Down(context.Background(), time.Minute) })
	assert.ErrorIs(t, err, errStuckBoot)
	assert.Contains(t, err.Error(), "n1: never got from power-on to the init in 15s, twice (reset once); its console ends \"")
	assert.Contains(t, logs.String(), "n1: pressed its reset button; it gets 15s more")
	// The firmware ran again after the reset: its boot manager printed
	// twice.
	vm, verr := c.VM("n1")
	require.NoError(t, verr)
	assert.GreaterOrEqual(t, strings.Count(vm.Console(), "BdsDxe: "), 2, "console:\n%s", vm.ConsoleTail(30))
}

// blankNode is the configuration of a one-node cluster under TCG whose
// disk is blank, so that its firmware finds nothing to boot; it sets
// every accelerator's bound in limits to d for the test. It skips under
// -short.
func blankNode(t *testing.T, limits *map[string]time.Duration, d time.Duration) Config {
	t.Helper()
	if testing.Short() {
		t.Skip("starts QEMU; runs without -short")
	}
	old := *limits
	*limits = map[string]time.Duration{qemu.AccelKVM: d, qemu.AccelTCG: d}
	t.Cleanup(func() { *limits = old })
	code, vars := testenv.OVMF(t)
	img := filepath.Join(t.TempDir(), "blank.raw")
	require.NoError(t, os.WriteFile(img, make([]byte, 1<<20), 0o644))
	return Config{Dir: t.TempDir(), Image: img, OVMFCode: code, OVMFVars: vars, MemoryMiB: 256, Accel: qemu.AccelTCG}
}

// safeLog keeps what a cluster logs, from any goroutine, and passes it on
// to the test's log.
type safeLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *safeLog) add(t *testing.T) func(string, ...any) {
	return func(format string, args ...any) {
		t.Logf(format, args...)
		l.mu.Lock()
		defer l.mu.Unlock()
		fmt.Fprintf(&l.b, format+"\n", args...)
	}
}

func (l *safeLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
