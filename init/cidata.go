package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdbox/etcdbox/seed"
)

// cidataLabel is the volume label of a NoCloud seed volume, as
// cloud-localds writes it (FAT or ISO9660).
const cidataLabel = "cidata"

// volumeLabel reads the label of a FAT or ISO9660 filesystem at the start
// of r, and its type for mount(2): "vfat" or "iso9660". It returns "" for
// anything else.
func volumeLabel(r io.ReaderAt) (label, fstype string) {
	boot := make([]byte, 512)
	if _, err := r.ReadAt(boot, 0); err == nil && boot[510] == 0x55 && boot[511] == 0xAA {
		// FAT32 keeps its label at 71 with "FAT32   " at 82; FAT12/16
		// at 43 with "FAT12   "/"FAT16   " at 54.
		switch {
		case bytes.HasPrefix(boot[82:90], []byte("FAT32")):
			return strings.TrimSpace(string(boot[71:82])), "vfat"
		case bytes.HasPrefix(boot[54:62], []byte("FAT")):
			return strings.TrimSpace(string(boot[43:54])), "vfat"
		}
	}
	pvd := make([]byte, 72)
	if _, err := r.ReadAt(pvd, 16*2048); err == nil && pvd[0] == 1 && string(pvd[1:6]) == "CD001" {
		return strings.TrimSpace(string(pvd[40:72])), "iso9660"
	}
	return "", ""
}

// findCidata returns the block device holding a cidata volume, by probing
// every whole disk and partition the kernel lists.
func findCidata(sysBlock, devDir string) (dev, fstype string, err error) {
	dev, fstype, err = findVolume(sysBlock, devDir, cidataLabel)
	if err == nil && dev == "" {
		err = errNoCidata
	}
	return dev, fstype, err
}

// findVolume returns the block device whose FAT or ISO9660 filesystem has
// the label (any case), "" when none has, probing every whole disk and
// partition the kernel lists (a cidata volume, an OpenStack config drive).
func findVolume(sysBlock, devDir, label string) (dev, fstype string, err error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return "", "", fmt.Errorf("look for a %s volume: %w", label, err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") {
			continue
		}
		path := filepath.Join(devDir, name)
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		l, fs := volumeLabel(f)
		f.Close()
		if fs != "" && strings.EqualFold(l, label) {
			return path, fs, nil
		}
	}
	return "", "", nil
}

var errNoCidata = errors.New("no cidata volume")

// readCidata mounts a NoCloud cidata volume read-only and returns its
// user-data, which holds the seed YAML.
func readCidata() ([]byte, bool, error) {
	dev, fstype, err := findCidata("/sys/class/block", "/dev")
	if errors.Is(err, errNoCidata) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	dir := "/run/etcdbox/cidata"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	if err := mountReadOnly(dev, dir, fstype); err != nil {
		return nil, false, fmt.Errorf("mount cidata volume %s: %w", dev, err)
	}
	defer unmount(dir)
	b, err := seed.ReadFile(filepath.Join(dir, "user-data"))
	if err != nil {
		return nil, false, fmt.Errorf("cidata volume %s: %w", dev, err)
	}
	return b, true, nil
}
