package qemu

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Binaries; tests and users put other versions first in PATH.
const (
	qemuBinary = "qemu-system-x86_64"
	imgBinary  = "qemu-img"
)

var accelOnce = sync.OnceValue(probeAccel)

// Accel returns the accelerator Start uses when Config.Accel is empty:
// "kvm" when KVM works, else "tcg". The answer is probed once per process.
//
// Opening /dev/kvm is not enough: in some nested setups it opens and
// creates VMs, yet QEMU aborts when it loads the vCPU's registers ("failed
// to set MSR"). So the probe starts a paused QEMU with KVM and asks it to
// quit; a clean exit means KVM works.
func Accel() string { return accelOnce() }

func probeAccel() string {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "tcg"
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemuBinary,
		"-accel", "kvm", "-cpu", "host", "-machine", "q35",
		"-no-user-config", "-nodefaults", "-display", "none", "-S", "-qmp", "stdio")
	cmd.Stdin = strings.NewReader(`{"execute":"qmp_capabilities"}` + "\n" + `{"execute":"quit"}` + "\n")
	if err := cmd.Run(); err != nil {
		return "tcg"
	}
	return "kvm"
}
