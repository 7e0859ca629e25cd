// Package flash writes a disk image onto a block device in place: how an
// appliance's disk or a USB stick is flashed (`etcdbox build -o /dev/sdX`).
//
// A file output is written under a temporary name and renamed into
// place; that would replace a device node with a regular file and write
// nothing to the disk, so a block device takes this path instead. Before
// the first byte is written, Check refuses a device that is mounted or
// otherwise held by the kernel (a partition mounted, swap, RAID or
// device-mapper), one smaller than the image, and, unless forced, one
// that does not look blank. Write then copies every byte, zeros
// included (the image's DATA placeholder must read as zeros, or a node
// could mount an old filesystem left on the device), opens the device
// exclusively, syncs, drops the device's cache and reads the device back
// to compare it with the image.
package flash

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotBlank is wrapped by Check when the device holds data and Force
// is not set.
var ErrNotBlank = errors.New("not blank")

// Options tunes Check and Write.
type Options struct {
	// Force overwrites a device that does not look blank.
	Force bool
	// Progress gets a line every tenth of the way; nil for none.
	Progress io.Writer
	// MountInfo and Swaps are the kernel's tables read by the mount
	// check; empty means /proc/self/mountinfo and /proc/swaps.
	MountInfo, Swaps string
	// SysBlock is sysfs's block device directory; empty means
	// /sys/dev/block.
	SysBlock string
}

func (o Options) withDefaults() Options {
	if o.MountInfo == "" {
		o.MountInfo = "/proc/self/mountinfo"
	}
	if o.Swaps == "" {
		o.Swaps = "/proc/swaps"
	}
	if o.SysBlock == "" {
		o.SysBlock = "/sys/dev/block"
	}
	return o
}

// IsBlockDevice reports whether path (after symbolic links) is a block
// device, the kind of output Write is for.
func IsBlockDevice(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

// blankBytes is how much of the device's start must be zero for it to
// look blank: every partition table and the superblock of every common
// filesystem lies in the first MiB.
const blankBytes = 1 << 20

// Check reports whether an image of size bytes may be written onto dev:
// a block device, not in use, at least size bytes, and blank unless
// o.Force. It changes nothing.
func Check(dev string, size int64, o Options) error {
	o = o.withDefaults()
	if !IsBlockDevice(dev) {
		return fmt.Errorf("flash %s: not a block device", dev)
	}
	if err := notInUse(dev, o); err != nil {
		return fmt.Errorf("flash %s: %w", dev, err)
	}
	f, err := os.Open(dev)
	if err != nil {
		return fmt.Errorf("flash %s: %w", dev, err)
	}
	defer f.Close()
	devSize, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("flash %s: size: %w", dev, err)
	}
	if devSize < size {
		return fmt.Errorf("flash %s: the device holds %s, the image needs %s; build a smaller image (--size) or use a larger device",
			dev, mib(devSize), mib(size))
	}
	if o.Force {
		return nil
	}
	head := make([]byte, min(blankBytes, devSize))
	if _, err := f.ReadAt(head, 0); err != nil {
		return fmt.Errorf("flash %s: read: %w", dev, err)
	}
	if what := contents(head); what != "" {
		return fmt.Errorf("flash %s: %w: it holds %s; --force overwrites it, and everything on it is lost", dev, ErrNotBlank, what)
	}
	return nil
}

// contents names what the start of a device holds, or "" when it is
// all zeros.
func contents(head []byte) string {
	if !bytes.ContainsFunc(head, func(r rune) bool { return r != 0 }) {
		return ""
	}
	switch {
	case len(head) >= 520 && string(head[512:520]) == "EFI PART":
		return "a GPT partition table"
	case len(head) >= 1082 && binary.LittleEndian.Uint16(head[1080:]) == 0xEF53:
		return "an ext2/3/4 filesystem"
	case len(head) >= 90 && (string(head[82:87]) == "FAT32" || string(head[54:59]) == "FAT16" || string(head[54:59]) == "FAT12"):
		return "a FAT filesystem"
	case len(head) >= 512 && head[510] == 0x55 && head[511] == 0xAA:
		return "an MBR partition table or boot sector"
	}
	return "data in its first MiB"
}

// chunk is the unit of copying, progress and cancellation.
const chunk = 4 << 20

// Write copies the image file onto dev after Check, then syncs and reads
// the device back to compare. It returns the bytes written.
func Write(ctx context.Context, imagePath, dev string, o Options) (int64, error) {
	o = o.withDefaults()
	src, err := os.Open(imagePath)
	if err != nil {
		return 0, fmt.Errorf("flash: %w", err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return 0, fmt.Errorf("flash: %w", err)
	}
	size := fi.Size()
	if err := Check(dev, size, o); err != nil {
		return 0, err
	}
	dst, err := openExclusive(dev)
	if err != nil {
		return 0, fmt.Errorf("flash %s: %w", dev, err)
	}
	defer dst.Close()
	want := sha256.New()
	p := progress{w: o.Progress, dev: dev, total: size, verb: "wrote"}
	buf := make([]byte, chunk)
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("flash %s: stopped after %s of %s (the device holds part of the image; flash it again): %w", dev, mib(n), mib(size), err)
		}
		k, err := io.ReadFull(src, buf[:min(chunk, size-n)])
		if err != nil {
			return n, fmt.Errorf("flash: read %s: %w", imagePath, err)
		}
		want.Write(buf[:k])
		if _, err := dst.WriteAt(buf[:k], n); err != nil {
			return n, fmt.Errorf("flash %s: write at %d: %w", dev, n, err)
		}
		n += int64(k)
		p.at(n)
	}
	if err := dst.Sync(); err != nil {
		return n, fmt.Errorf("flash %s: sync: %w", dev, err)
	}
	// Read back what the device holds, not what the page cache kept.
	if err := dropCache(dst); err != nil {
		return n, fmt.Errorf("flash %s: %w", dev, err)
	}
	got := sha256.New()
	p = progress{w: o.Progress, dev: dev, total: size, verb: "verified"}
	var m int64
	for m < size {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("flash %s: verifying: %w", dev, err)
		}
		k, err := dst.ReadAt(buf[:min(chunk, size-m)], m)
		if err != nil && !(errors.Is(err, io.EOF) && int64(k) == min(chunk, size-m)) {
			return n, fmt.Errorf("flash %s: read back at %d: %w", dev, m, err)
		}
		got.Write(buf[:k])
		m += int64(k)
		p.at(m)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		return n, fmt.Errorf("flash %s: the device does not read back as the image (sha256 %x, want %x): the device may be failing", dev, got.Sum(nil), want.Sum(nil))
	}
	// Let the kernel see the new partitions now rather than at the next
	// attach; a device without partition support (a loop device made
	// without -P) refuses, which changes nothing on the disk.
	rereadPartitions(dst)
	return n, nil
}

// progress prints a line each time another tenth of total is done.
type progress struct {
	w         io.Writer
	dev, verb string
	total     int64
	tenths    int64 // tenths already printed
}

func (p *progress) at(n int64) {
	if p.w == nil || p.total == 0 || n*10/p.total <= p.tenths {
		return
	}
	p.tenths = n * 10 / p.total
	fmt.Fprintf(p.w, "flash %s: %s %s of %s (%d%%)\n", p.dev, p.verb, mib(n), mib(p.total), n*100/p.total)
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
