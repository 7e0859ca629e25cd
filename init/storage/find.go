package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultSysBlock is where sysfs lists block devices.
const DefaultSysBlock = "/sys/class/block"

// Partition is a partition the kernel knows, found in sysfs.
type Partition struct {
	Dev  string // "/dev/vda2"
	Disk string // "/dev/vda"
	Num  int    // 2
	Name string // GPT partition name, "ETCDBOX-DATA"
}

// FindByLabel finds the partition whose GPT partition name is label, using
// what the kernel exports in sysBlock/<dev>/uevent (PARTNAME, DEVNAME,
// PARTN). It needs no blkid and reads no disk. Two partitions with the
// same name (a second etcdbox disk attached) are an error that names both.
func FindByLabel(sysBlock, label string) (dev, disk string, partNum int, err error) {
	ps, err := findAll(sysBlock, label, "")
	if err != nil {
		return "", "", 0, err
	}
	p := ps[0]
	return p.Dev, p.Disk, p.Num, nil
}

// WaitForLabel polls FindByLabel every 50ms until the partition appears
// or ctx ends: disks show up asynchronously after their driver loads.
func WaitForLabel(ctx context.Context, sysBlock, label string) (dev, disk string, partNum int, err error) {
	p, err := waitFor(ctx, sysBlock, label, "")
	return p.Dev, p.Disk, p.Num, err
}

func waitFor(ctx context.Context, sysBlock, label, onDisk string) (Partition, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ps, err := findAll(sysBlock, label, onDisk)
		if err == nil {
			return ps[0], nil
		}
		if _, missing := err.(notFoundError); !missing {
			return Partition{}, err // ambiguity does not go away by waiting
		}
		select {
		case <-ctx.Done():
			return Partition{}, fmt.Errorf("wait for partition %q: %w (%v)", label, ctx.Err(), err)
		case <-t.C:
		}
	}
}

type notFoundError struct{ label, sysBlock string }

func (e notFoundError) Error() string {
	return fmt.Sprintf("no partition named %q in %s", e.label, e.sysBlock)
}

// findAll returns exactly one partition named label (on disk onDisk when
// set), or an error.
func findAll(sysBlock, label, onDisk string) ([]Partition, error) {
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, fmt.Errorf("find partition %q: %w", label, err)
	}
	var found []Partition
	for _, e := range ents {
		u, err := readUevent(filepath.Join(sysBlock, e.Name(), "uevent"))
		if err != nil || u["DEVTYPE"] != "partition" || u["PARTNAME"] != label {
			continue
		}
		p, err := partitionOf(sysBlock, e.Name(), u)
		if err != nil {
			return nil, fmt.Errorf("find partition %q: %w", label, err)
		}
		if onDisk == "" || p.Disk == onDisk {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, notFoundError{label, sysBlock}
	case 1:
		return found, nil
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Dev < found[j].Dev })
	var devs []string
	for _, p := range found {
		devs = append(devs, p.Dev)
	}
	return nil, fmt.Errorf("find partition %q: found %d: %s", label, len(found), strings.Join(devs, ", "))
}

// partitionOf builds a Partition from its uevent. The disk is the parent
// directory in /sys/devices: /sys/class/block/nvme0n1p2 links to
// .../block/nvme0n1/nvme0n1p2, and disk names cannot be derived by
// trimming digits (nvme0n1p2, mmcblk0p2).
func partitionOf(sysBlock, entry string, u map[string]string) (Partition, error) {
	name := u["DEVNAME"]
	if name == "" {
		name = entry
	}
	num, err := strconv.Atoi(u["PARTN"])
	if err != nil {
		return Partition{}, fmt.Errorf("%s: PARTN %q: %v", entry, u["PARTN"], err)
	}
	resolved, err := filepath.EvalSymlinks(filepath.Join(sysBlock, entry))
	if err != nil {
		return Partition{}, fmt.Errorf("%s: %w", entry, err)
	}
	parent, err := readUevent(filepath.Join(filepath.Dir(resolved), "uevent"))
	if err != nil || parent["DEVTYPE"] != "disk" || parent["DEVNAME"] == "" {
		return Partition{}, fmt.Errorf("%s: no disk above %s", entry, resolved)
	}
	return Partition{
		Dev:  "/dev/" + name,
		Disk: "/dev/" + parent["DEVNAME"],
		Num:  num,
		Name: u["PARTNAME"],
	}, nil
}

// readUevent parses KEY=VALUE lines.
func readUevent(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m, nil
}
