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
	return loop(tb, file)
}

// LoopPartitions is Loop with the file's partitions as devices,
// DEVICEpN: the kernel scans the partition table (losetup -P), and where
// it cannot read GPT (a kernel without CONFIG_EFI_PARTITION, as some CI
// machines run) partx reads the table and adds them. A partition's node
// may appear just after this returns.
func LoopPartitions(tb testing.TB, file string) string {
	tb.Helper()
	dev := loop(tb, file, "--partscan")
	// Best effort: partx fails on partitions the kernel added itself.
	_ = exec.Command("partx", "--add", dev).Run()
	return dev
}

func loop(tb testing.TB, file string, args ...string) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root for a loop device (losetup)")
	}
	out, err := exec.Command("losetup", append(append([]string{"--find", "--show"}, args...), file)...).CombinedOutput()
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
