package cluster

import (
	"context"
	"os"
	"path/filepath"
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
	if testing.Short() {
		t.Skip("starts QEMU; runs without -short")
	}
	old := GuestSilence
	GuestSilence = map[string]time.Duration{qemu.AccelKVM: 3 * time.Second, qemu.AccelTCG: 3 * time.Second}
	t.Cleanup(func() { GuestSilence = old })

	code, vars := testenv.OVMF(t)
	img := filepath.Join(t.TempDir(), "blank.raw")
	require.NoError(t, os.WriteFile(img, make([]byte, 1<<20), 0o644))
	cfg := Config{Dir: t.TempDir(), Image: img, OVMFCode: code, OVMFVars: vars, MemoryMiB: 256,
		Accel: qemu.AccelTCG, QEMUArgs: []string{"-S"}, Log: t.Logf}
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
