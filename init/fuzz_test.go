package main

import (
	"bytes"
	"testing"
)

// FuzzVolumeLabel: any first sector (and ISO9660 descriptor) either names
// a FAT or ISO9660 label or nothing, never a panic, and a type is only
// ever one mount(2) takes.
func FuzzVolumeLabel(f *testing.F) {
	fat := make([]byte, 512)
	copy(fat[71:], "cidata     FAT32   ")
	fat[510], fat[511] = 0x55, 0xAA
	f.Add(fat)
	f.Add(make([]byte, 40000))
	f.Add([]byte{0x55, 0xAA})
	f.Fuzz(func(t *testing.T, data []byte) {
		label, fstype := volumeLabel(bytes.NewReader(data))
		switch fstype {
		case "", "vfat", "iso9660":
		default:
			t.Fatalf("type %q", fstype)
		}
		if fstype == "" && label != "" {
			t.Fatalf("label %q without a type", label)
		}
	})
}
