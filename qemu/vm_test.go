package qemu

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// firmwareVM starts a VM whose disk boots nothing: OVMF runs its boot
// manager, prints "BdsDxe:" lines on the serial console, and settles in
// the UEFI shell, which ignores the ACPI power button.
func firmwareVM(t *testing.T, ctx context.Context) (*VM, Config) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots QEMU; runs without -short")
	}
	code, vars := testenv.OVMF(t)
	img := filepath.Join(t.TempDir(), "empty.raw")
	require.NoError(t, os.WriteFile(img, make([]byte, 1<<20), 0o644))
	cfg := Config{
		Name: "fw", Dir: filepath.Join(t.TempDir(), "fw"), Image: img, Overlay: true,
		OVMFCode: code, OVMFVars: vars, MemoryMiB: 256,
		Forwards: []Forward{{GuestPort: 2379}},
	}
	vm, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		vm.Kill()
		<-vm.Done()
	})
	t.Logf("accel %s, console %s", Accel(), vm.ConsolePath())
	return vm, cfg
}

func TestVMLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	vm, cfg := firmwareVM(t, ctx)

	st, err := vm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "running", st)

	// The disk's limit: none at start, then set and read back from QEMU,
	// then lifted; a negative one is refused before QEMU sees it.
	lim, err := vm.DiskLimit(ctx)
	require.NoError(t, err)
	assert.True(t, lim.Zero(), "a new VM's disk is limited: %s", lim)
	want := DiskLimit{IOPS: 20, BPS: 1 << 20}
	require.NoError(t, vm.LimitDisk(ctx, want))
	lim, err = vm.DiskLimit(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, lim)
	assert.Equal(t, "20 iops, 1048576 B/s", lim.String())
	require.NoError(t, vm.LimitDisk(ctx, DiskLimit{}))
	lim, err = vm.DiskLimit(ctx)
	require.NoError(t, err)
	assert.True(t, lim.Zero(), "the limit stays after it was lifted: %s", lim)
	assert.ErrorContains(t, vm.LimitDisk(ctx, DiskLimit{IOPS: -1}), "negative")

	port := vm.HostPort(2379)
	require.NotZero(t, port)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	require.NoError(t, err, "the host end of the forward listens")
	c.Close()

	m, err := vm.WaitConsole(ctx, 0, "BdsDxe:")
	require.NoError(t, err, "console:\n%s", vm.ConsoleTail(20))
	t.Logf("console: %s", Printable(m.Line))

	// Reset reboots the firmware: the boot manager runs again after the mark.
	mark := vm.Mark()
	require.NoError(t, vm.Reset(ctx))
	_, err = vm.WaitConsole(ctx, mark, "BdsDxe:")
	require.NoError(t, err, "console:\n%s", vm.ConsoleTail(20))

	// Another process finds the VM from its directory; the directory
	// cannot run a second QEMU.
	att, err := Attach(cfg.Dir)
	require.NoError(t, err)
	assert.Equal(t, vm.PID(), att.PID())
	_, err = Start(ctx, cfg)
	assert.ErrorIs(t, err, ErrRunning)

	require.NoError(t, vm.Quit(ctx))
	require.NoError(t, vm.Wait(ctx))
	require.NoError(t, att.Wait(ctx), "an attached VM sees the exit too")
	_, err = Attach(cfg.Dir)
	assert.ErrorIs(t, err, ErrNotRunning)
	_, err = vm.WaitConsole(ctx, vm.Mark(), "never printed")
	assert.ErrorIs(t, err, ErrExited)

	// Starting the directory again powers the same machine on: the disk
	// and UEFI variables are kept, the last console moves aside.
	diskPath := filepath.Join(cfg.Dir, "disk.qcow2")
	before, err := os.Stat(diskPath)
	require.NoError(t, err)
	cfg.DiskSize = 64 << 20
	vm2, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { vm2.Kill() })
	after, err := os.Stat(diskPath)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after), "the disk is reused")
	size, err := virtualSize(ctx, cfg.Dir, disk{"disk.qcow2", "qcow2"})
	require.NoError(t, err)
	assert.Equal(t, int64(64<<20), size)
	assert.FileExists(t, filepath.Join(cfg.Dir, "console.log.1"))
	assert.NoError(t, vm2.Quit(ctx))
	assert.NoError(t, vm2.Wait(ctx))
}

func TestVMStopForcesAfterGrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	vm, _ := firmwareVM(t, ctx)
	// The UEFI shell has no ACPI handler, so the power button does nothing
	// and Stop falls back to quit.
	_, err := vm.WaitConsole(ctx, 0, "BdsDxe:")
	require.NoError(t, err)
	start := time.Now()
	err = vm.Stop(ctx, 2*time.Second)
	assert.ErrorIs(t, err, ErrForced)
	assert.Less(t, time.Since(start), 30*time.Second)
	select {
	case <-vm.Done():
	default:
		t.Fatal("qemu still runs after Stop")
	}
	assert.NoError(t, vm.Stop(ctx, time.Second), "stopping a stopped VM")
}
