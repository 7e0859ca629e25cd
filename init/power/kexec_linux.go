package power

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// kexecFileLoad is the seam for tests: loading a kernel for real needs
// CAP_SYS_BOOT, and a test must not replace the running kernel's image.
var kexecFileLoad = unix.KexecFileLoad

// LoadKexec loads kernel and initrd (host paths) with cmdline as the
// kernel to jump into at Halt(Kexec), through kexec_file_load(2): the
// running kernel reads and checks the files itself (a signed kernel where
// its lockdown asks for one), and a bad file fails here, before anything
// is committed. It loads nothing the firmware path needs, so a failure
// leaves a plain reboot available.
func LoadKexec(kernel, initrd, cmdline string) error {
	k, err := os.Open(kernel)
	if err != nil {
		return fmt.Errorf("kexec: %w", err)
	}
	defer k.Close()
	i, err := os.Open(initrd)
	if err != nil {
		return fmt.Errorf("kexec: %w", err)
	}
	defer i.Close()
	// x/sys/unix passes the command line with its terminating NUL, which
	// the kernel wants.
	if err := kexecFileLoad(int(k.Fd()), int(i.Fd()), cmdline, 0); err != nil {
		switch {
		case errors.Is(err, unix.ENOSYS):
			err = fmt.Errorf("%w (the kernel has no kexec_file_load)", err)
		case errors.Is(err, unix.EPERM):
			err = fmt.Errorf("%w (no CAP_SYS_BOOT, or kexec disabled: kernel.kexec_load_disabled, lockdown)", err)
		case errors.Is(err, unix.EKEYREJECTED), errors.Is(err, unix.EBADMSG):
			err = fmt.Errorf("%w (the kernel's signature was refused)", err)
		}
		return fmt.Errorf("kexec_file_load %s: %w", kernel, err)
	}
	return nil
}
