package power

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Seams for tests: a test that really called reboot(2) as root would take
// the machine down.
var (
	syncFS  = unix.Sync
	reboot  = unix.Reboot
	unmount = unix.Unmount
	remount = func(target string) error {
		return unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
)

// Halt syncs filesystems and powers off or reboots. It returns only when
// the kernel refused: without CAP_SYS_BOOT, or in a container (where
// reboot(2) from the namespace's init ends the namespace instead).
func Halt(a Action) error {
	var cmd int
	switch a {
	case PowerOff:
		cmd = unix.LINUX_REBOOT_CMD_POWER_OFF
	case Reboot:
		cmd = unix.LINUX_REBOOT_CMD_RESTART
	case Kexec:
		cmd = unix.LINUX_REBOOT_CMD_KEXEC
	default:
		return fmt.Errorf("halt: unknown action %d", int(a))
	}
	syncFS()
	if err := reboot(cmd); err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	return nil
}

// Unmount syncs, then unmounts mountpoints in reverse order (list them in
// the order they were mounted), then syncs again. A mountpoint that is not
// mounted is skipped. One that is busy is remounted read-only, which makes
// its filesystem consistent on disk where nothing has it open for writing,
// and then detached (MNT_DETACH), so the rest of the shutdown goes on. It
// returns every failure, joined.
func Unmount(mountpoints []string, logf func(format string, args ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	syncFS()
	var errs []error
	for i := len(mountpoints) - 1; i >= 0; i-- {
		mp := mountpoints[i]
		err := unmount(mp, 0)
		if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			continue // unmounted, or not mounted at all
		}
		logf("unmount %s: %v; remounting read-only and detaching", mp, err)
		if rerr := remount(mp); rerr != nil {
			errs = append(errs, fmt.Errorf("remount %s read-only: %w", mp, rerr))
		}
		if derr := unmount(mp, unix.MNT_DETACH); derr != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w; detach: %w", mp, err, derr))
		} else {
			errs = append(errs, fmt.Errorf("unmount %s: %w (detached)", mp, err))
		}
	}
	syncFS()
	return errors.Join(errs...)
}
