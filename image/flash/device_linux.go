package flash

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// notInUse refuses a device that the kernel holds: the device or one of
// its partitions mounted or used as swap, or claimed by device-mapper or
// RAID (a holder in sysfs). Each is named, so the operator knows what to
// unmount; an exclusive open in Write is the last word.
func notInUse(dev string, o Options) error {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return err
	}
	ids := map[string]string{devID(st.Rdev): dev}
	sys := filepath.Join(o.SysBlock, devID(st.Rdev))
	// The partitions of a whole disk are its sysfs subdirectories that
	// hold a "partition" file; their "dev" files give major:minor.
	entries, _ := os.ReadDir(sys)
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(sys, e.Name(), "partition")); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(sys, e.Name(), "dev")); err == nil {
			ids[strings.TrimSpace(string(b))] = "/dev/" + e.Name()
		}
		if err := noHolders(filepath.Join(sys, e.Name()), "/dev/"+e.Name()); err != nil {
			return err
		}
	}
	if err := noHolders(sys, dev); err != nil {
		return err
	}
	if err := notMounted(o.MountInfo, ids); err != nil {
		return err
	}
	return notSwap(o.Swaps, ids)
}

func devID(rdev uint64) string {
	return fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev))
}

// noHolders refuses a device another block device is built on.
func noHolders(sysDir, name string) error {
	hs, _ := os.ReadDir(filepath.Join(sysDir, "holders"))
	if len(hs) > 0 {
		return fmt.Errorf("%s is in use by /dev/%s (device-mapper, LVM or RAID); release it first", name, hs[0].Name())
	}
	return nil
}

// notMounted reads a mountinfo table: its third field is the
// major:minor of the mounted filesystem's device.
func notMounted(mountinfo string, ids map[string]string) error {
	f, err := os.Open(mountinfo)
	if err != nil {
		return fmt.Errorf("check mounts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if name, ok := ids[fields[2]]; ok {
			return fmt.Errorf("%s is mounted on %s; unmount it first", name, unescapeMount(fields[4]))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("check mounts: %s: %w", mountinfo, err)
	}
	return nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// notSwap refuses a device used as swap: /proc/swaps names it by path.
func notSwap(swaps string, ids map[string]string) error {
	b, err := os.ReadFile(swaps)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check swap: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fields[0], &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
			continue
		}
		if name, ok := ids[devID(st.Rdev)]; ok {
			return fmt.Errorf("%s is in use as swap; swapoff it first", name)
		}
	}
	return nil
}

// openExclusive opens dev for writing with O_EXCL, which for a block
// device claims it: the open fails with EBUSY while the kernel holds the
// device or one of its partitions, and nothing can mount it meanwhile.
func openExclusive(dev string) (*os.File, error) {
	f, err := os.OpenFile(dev, os.O_RDWR|syscall.O_EXCL, 0)
	if errors.Is(err, syscall.EBUSY) {
		return nil, fmt.Errorf("%w: the kernel holds it (mounted, swap, RAID or device-mapper)", err)
	}
	return f, err
}

// dropCache writes back and drops the device's buffered pages, so that
// what is read next comes from the device.
func dropCache(f *os.File) error {
	if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0); err != nil {
		return fmt.Errorf("flush buffers: %w", err)
	}
	return nil
}

// rereadPartitions asks the kernel to read the new partition table.
func rereadPartitions(f *os.File) {
	_ = unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0)
}
