// Package storage prepares the node's disk at boot (DESIGN §2 step 4): it
// finds the ESP and DATA partitions by GPT name, grows DATA to the end of
// the disk, formats it on first boot, checks it on every boot, and mounts
// it. Partition tables are edited in pure Go; filesystems are handled by
// the e2fsprogs binaries shipped in the initramfs, never by a Go ext4
// writer.
//
//	rep, err := storage.PrepareData(ctx, storage.Options{Logf: log.Printf})
//	switch {
//	case errors.Is(err, storage.ErrUnknownData), errors.Is(err, storage.ErrNeedsRepair):
//		// report and wait for an operator: never format
//	case err != nil:
//		// fatal
//	}
//
// The rule that protects data: only a partition whose first MiB is all
// zeros (the builder's placeholder) is ever formatted. Anything else that
// is not ext4 is reported with ErrUnknownData, and an ext4 that e2fsck -p
// cannot fix with ErrNeedsRepair.
package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Names and defaults of the disk layout (DESIGN §3).
const (
	DataLabel     = "ETCDBOX-DATA" // GPT partition name
	ESPLabel      = "ETCDBOX-ESP"  // GPT partition name
	DataFSLabel   = "etcdbox-data" // ext4 label
	DataMountPath = "/var/lib/etcdbox"
	// DataMountOptions: no device nodes, no setuid, no atime writes.
	DataMountOptions = "nodev,nosuid,noatime"
)

// ErrUnknownData means DATA holds something that is neither ext4 nor the
// blank placeholder. The node must not format it.
var ErrUnknownData = errors.New("DATA partition holds unknown data")

// Options configures PrepareData. Zero values mean the defaults; the
// function fields are seams for tests.
type Options struct {
	SysBlock     string        // DefaultSysBlock
	DevDir       string        // "/dev"; device paths from sysfs are rebased here
	Label        string        // DataLabel
	Disk         string        // only consider partitions on this disk ("/dev/vda"); "" = any
	FSLabel      string        // DataFSLabel
	Target       string        // DataMountPath
	MountOptions string        // DataMountOptions
	Wait         time.Duration // how long DATA may take to appear; default 30s
	Tools        *Tools        // e2fsprogs; nil = defaults

	// ResizePartition tells the kernel about a grown partition; nil means
	// ResizePartition (BLKPG).
	ResizePartition func(disk *os.File, num int, start, length int64) error
	// Mount mounts the filesystem; nil means Mount.
	Mount func(dev, target, fstype, options string) error
	// Logf reports progress; nil discards.
	Logf func(format string, args ...any)
}

// Report says what PrepareData did, for the boot log.
type Report struct {
	Dev, Disk      string
	PartNum        int
	State          State // what Probe found before anything was done
	Formatted      bool
	PartitionGrown bool // the GPT entry (and the kernel's view) grew
	FSGrown        bool // resize2fs ran
	Fsck           FsckResult
	PartitionBytes int64 // partition size at the end
	FSBytesBefore  int64 // filesystem size after fsck, before growing
	FSBytes        int64 // filesystem size at the end
	// GrowErr is why growing the partition or the filesystem failed.
	// Growing is optional: PrepareData logs it, leaves DATA at its size
	// and still succeeds, and the next boot tries again.
	GrowErr error
}

func (o *Options) defaults() {
	if o.SysBlock == "" {
		o.SysBlock = DefaultSysBlock
	}
	if o.DevDir == "" {
		o.DevDir = "/dev"
	}
	if o.Label == "" {
		o.Label = DataLabel
	}
	if o.FSLabel == "" {
		o.FSLabel = DataFSLabel
	}
	if o.Target == "" {
		o.Target = DataMountPath
	}
	if o.MountOptions == "" {
		o.MountOptions = DataMountOptions
	}
	if o.Wait == 0 {
		o.Wait = 30 * time.Second
	}
	if o.Tools == nil {
		o.Tools = &Tools{}
	}
	if o.ResizePartition == nil {
		o.ResizePartition = ResizePartition
	}
	if o.Mount == nil {
		o.Mount = Mount
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// PrepareData finds DATA and leaves it mounted at Target:
//
//  1. wait for the partition named Label;
//  2. probe it: Unknown -> ErrUnknownData, nothing written; Blank (first
//     boot) -> grow the GPT entry to the disk's end, tell the kernel
//     (BLKPG), mke2fs;
//  3. e2fsck -p: damage it cannot fix -> ErrNeedsRepair, not mounted;
//  4. mount;
//  5. if the disk grew since (a resized cloud volume): grow the GPT entry,
//     tell the kernel, and resize2fs online. Step 5 also finishes a grow
//     that a power cut interrupted between the partition and the
//     filesystem, because it compares the filesystem with the partition,
//     not the GPT with the disk.
//
// Growing (steps 2 and 5) is optional: a failure is logged and kept in
// Report.GrowErr, and DATA is used at the size it has. Everything else is
// an error. The report is filled as far as PrepareData got, also on error.
func PrepareData(ctx context.Context, o Options) (Report, error) {
	o.defaults()
	var rep Report
	wctx, cancel := context.WithTimeout(ctx, o.Wait)
	defer cancel()
	onDisk := ""
	if o.Disk != "" {
		onDisk = "/dev/" + filepath.Base(o.Disk)
	}
	p, err := waitFor(wctx, o.SysBlock, o.Label, onDisk)
	if err != nil {
		return rep, err
	}
	rep.Dev = filepath.Join(o.DevDir, filepath.Base(p.Dev))
	rep.Disk = filepath.Join(o.DevDir, filepath.Base(p.Disk))
	rep.PartNum = p.Num
	o.Logf("storage: %s is %s (partition %d of %s)", o.Label, rep.Dev, rep.PartNum, rep.Disk)

	rep.State, err = Probe(rep.Dev)
	if err != nil {
		return rep, err
	}
	switch rep.State {
	case Unknown:
		return rep, fmt.Errorf("%s (%s): neither ext4 nor a blank placeholder; not formatting it: %w", rep.Dev, o.Label, ErrUnknownData)
	case Blank:
		o.Logf("storage: %s is blank: first boot, growing and formatting", rep.Dev)
		if err := growPartition(&o, &rep); err != nil {
			growFailed(&o, &rep, err)
		}
		if err := o.Tools.Mkfs(rep.Dev, o.FSLabel); err != nil {
			return rep, err
		}
		rep.Formatted = true
	}

	rep.Fsck, err = o.Tools.Fsck(rep.Dev)
	if err != nil {
		return rep, err
	}
	if rep.Fsck.Code != 0 {
		o.Logf("storage: e2fsck -p %s fixed errors (exit %d): %s", rep.Dev, rep.Fsck.Code, trim([]byte(rep.Fsck.Output)))
	}

	if err := o.Mount(rep.Dev, o.Target, "ext4", o.MountOptions); err != nil {
		return rep, err
	}

	if !rep.Formatted { // a fresh mke2fs already filled the grown partition
		if err := growPartition(&o, &rep); err != nil {
			growFailed(&o, &rep, err)
		}
	}
	if err := growFS(&o, &rep); err != nil {
		growFailed(&o, &rep, err)
	}
	return rep, nil
}

func growFailed(o *Options, rep *Report, err error) {
	o.Logf("storage: not growing %s: %v", rep.Dev, err)
	rep.GrowErr = errors.Join(rep.GrowErr, err)
}

// growFS runs resize2fs when the partition is larger than the filesystem.
func growFS(o *Options, rep *Report) error {
	var err error
	if rep.FSBytesBefore, err = ext4Size(rep.Dev); err != nil {
		return err
	}
	rep.FSBytes = rep.FSBytesBefore
	if rep.PartitionBytes, err = deviceSize(rep.Dev); err != nil {
		return err
	}
	// resize2fs may leave a tail smaller than a useful block group; a
	// MiB of slack keeps it from running on every boot.
	if rep.PartitionBytes-rep.FSBytes < DefaultAlign {
		return nil
	}
	o.Logf("storage: growing the filesystem on %s from %d to %d bytes", rep.Dev, rep.FSBytes, rep.PartitionBytes)
	if err := o.Tools.Grow(rep.Dev); err != nil {
		return err
	}
	rep.FSGrown = true
	if rep.FSBytes, err = ext4Size(rep.Dev); err != nil {
		return err
	}
	o.Logf("storage: the filesystem on %s is now %d bytes", rep.Dev, rep.FSBytes)
	return nil
}

// growPartition grows DATA's GPT entry to the disk's end and, if it grew,
// tells the kernel.
func growPartition(o *Options, rep *Report) error {
	disk, err := os.OpenFile(rep.Disk, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("grow %s: %w", rep.Dev, err)
	}
	defer disk.Close()
	r, err := GrowGPT(disk, o.Label)
	if err != nil {
		return err
	}
	if r.Number != rep.PartNum {
		return fmt.Errorf("grow %s: GPT says %q is partition %d, the kernel says %d", rep.Dev, o.Label, r.Number, rep.PartNum)
	}
	if r.Relocated {
		o.Logf("storage: moved the backup GPT of %s to the disk's end", rep.Disk)
	}
	if r.Grown {
		o.Logf("storage: grew partition %d of %s from %d to %d bytes", r.Number, rep.Disk, r.OldSize, r.Size)
	}
	// Also when the GPT was grown already (a power cut before the kernel
	// heard of it): BLKPG is cheap and converges the kernel's view.
	if size, err := deviceSize(rep.Dev); err != nil || size != r.Size {
		if err := o.ResizePartition(disk, r.Number, r.Start, r.Size); err != nil {
			return err
		}
		rep.PartitionGrown = true
	}
	rep.PartitionGrown = rep.PartitionGrown || r.Grown
	rep.PartitionBytes = r.Size
	return nil
}

// deviceSize returns the size in bytes of a file or block device.
func deviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	_, size, err := geometry(f)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, err)
	}
	return size, nil
}
