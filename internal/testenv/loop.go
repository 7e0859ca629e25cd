package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Loop attaches file to a free loop device and returns its path; the
// device is detached when the test ends. It needs root, and skips the
// test without it (CI runs make test as root).
func Loop(tb testing.TB, file string) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root for a loop device (losetup)")
	}
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		tb.Fatalf("losetup %s: %v: %s", file, err, out)
	}
	dev := strings.TrimSpace(string(out))
	tb.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			tb.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	return dev
}
