package storage

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// blockGeometry asks the kernel for a block device's logical sector size
// (BLKSSZGET) and size in bytes (BLKGETSIZE64).
func blockGeometry(f *os.File) (sectorSize, size int64, err error) {
	fd := int(f.Fd())
	ss, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
	if err != nil {
		return 0, 0, fmt.Errorf("BLKSSZGET %s: %w", f.Name(), err)
	}
	var sz uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&sz))); errno != 0 {
		return 0, 0, fmt.Errorf("BLKGETSIZE64 %s: %w", f.Name(), errno)
	}
	return int64(ss), int64(sz), nil
}

// ResizePartition tells the kernel that partition number num of disk now
// spans length bytes from start (BLKPG_RESIZE_PARTITION). Unlike
// re-reading the whole table (BLKRRPART), it works while the partition is
// mounted. start must be the partition's current start.
func ResizePartition(disk *os.File, num int, start, length int64) error {
	p := unix.BlkpgPartition{Start: start, Length: length, Pno: int32(num)}
	arg := unix.BlkpgIoctlArg{
		Op:      unix.BLKPG_RESIZE_PARTITION,
		Datalen: int32(unsafe.Sizeof(p)),
		Data:    (*byte)(unsafe.Pointer(&p)),
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, disk.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 {
		return fmt.Errorf("BLKPG resize partition %d of %s to %d bytes: %w", num, disk.Name(), length, errno)
	}
	return nil
}

// mountFlags maps the generic mount(8) options to MS_* flags; anything
// else goes to the filesystem as data.
var mountFlags = map[string]uintptr{
	"ro":          unix.MS_RDONLY,
	"nosuid":      unix.MS_NOSUID,
	"nodev":       unix.MS_NODEV,
	"noexec":      unix.MS_NOEXEC,
	"sync":        unix.MS_SYNCHRONOUS,
	"dirsync":     unix.MS_DIRSYNC,
	"noatime":     unix.MS_NOATIME,
	"nodiratime":  unix.MS_NODIRATIME,
	"relatime":    unix.MS_RELATIME,
	"strictatime": unix.MS_STRICTATIME,
	"lazytime":    unix.MS_LAZYTIME,
}

// Mount mounts dev on target (created if missing) with a mount(8)-style
// comma-separated option list, e.g. "noatime,nodev,errors=remount-ro".
func Mount(dev, target, fstype, options string) error {
	var flags uintptr
	var data []string
	for _, o := range strings.Split(options, ",") {
		switch f, ok := mountFlags[o]; {
		case o == "" || o == "rw" || o == "defaults":
		case ok:
			flags |= f
		default:
			data = append(data, o)
		}
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return fmt.Errorf("mount %s on %s: %w", dev, target, err)
	}
	if err := unix.Mount(dev, target, fstype, flags, strings.Join(data, ",")); err != nil {
		return fmt.Errorf("mount %s on %s: %w", dev, target, err)
	}
	return nil
}
