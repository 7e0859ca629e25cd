package image

import (
	"encoding/binary"
	"fmt"
	"io"
)

// fatDisk is the part of *os.File fixFAT32 needs.
type fatDisk interface {
	io.ReaderAt
	io.WriterAt
}

// fixFAT32 corrects two things go-diskfs v1.9.4 leaves in a FAT32 it
// creates, which `fsck.vfat -n` reports as errors:
//
//   - the ".." entry of a directory whose parent is the root points at the
//     root's cluster; the FAT specification wants cluster 0 there;
//   - the FSInfo free-cluster count is left "unknown" (0xffffffff).
//
// It also sets the volume serial number, which reproducible mode leaves
// 0, to serial (in the boot sector and its backup), so that different
// images get different /dev/disk/by-uuid names while equal inputs still
// give equal bytes.
//
// It patches the filesystem that starts at byte offset start, in place.
// The directories it walks are the few the ESP has, all created by
// writeESP, so a single-cluster root directory is assumed and checked.
func fixFAT32(d fatDisk, start int64, serial uint32) error {
	bs := make([]byte, 512)
	if _, err := d.ReadAt(bs, start); err != nil {
		return fmt.Errorf("read boot sector: %w", err)
	}
	var (
		bytesPerSector = int64(binary.LittleEndian.Uint16(bs[0x0b:]))
		perCluster     = int64(bs[0x0d]) * bytesPerSector
		reserved       = int64(binary.LittleEndian.Uint16(bs[0x0e:]))
		fats           = int64(bs[0x10])
		totalSectors   = int64(binary.LittleEndian.Uint32(bs[0x20:]))
		fatSectors     = int64(binary.LittleEndian.Uint32(bs[0x24:]))
		rootCluster    = binary.LittleEndian.Uint32(bs[0x2c:])
		fsInfoSector   = int64(binary.LittleEndian.Uint16(bs[0x30:]))
		backupSector   = int64(binary.LittleEndian.Uint16(bs[0x32:]))
	)
	if bytesPerSector == 0 || perCluster == 0 || fats == 0 || binary.LittleEndian.Uint16(bs[0x1fe:]) != 0xaa55 {
		return fmt.Errorf("no FAT32 boot sector at offset %d", start)
	}
	id := binary.LittleEndian.AppendUint32(nil, serial)
	for _, sec := range []int64{0, backupSector} {
		if _, err := d.WriteAt(id, start+sec*bytesPerSector+0x43); err != nil {
			return fmt.Errorf("write volume serial: %w", err)
		}
	}
	fatStart := start + reserved*bytesPerSector
	dataStart := fatStart + fats*fatSectors*bytesPerSector
	clusterOff := func(c uint32) int64 { return dataStart + int64(c-2)*perCluster }
	clusters := uint32((totalSectors - reserved - fats*fatSectors) * bytesPerSector / perCluster)

	fat := make([]byte, fatSectors*bytesPerSector)
	if _, err := d.ReadAt(fat, fatStart); err != nil {
		return fmt.Errorf("read FAT: %w", err)
	}
	entry := func(c uint32) uint32 { return binary.LittleEndian.Uint32(fat[4*c:]) & 0x0fffffff }
	if entry(rootCluster) < 0x0ffffff8 {
		return fmt.Errorf("root directory spans several clusters; fixFAT32 handles one")
	}

	root := make([]byte, perCluster)
	if _, err := d.ReadAt(root, clusterOff(rootCluster)); err != nil {
		return fmt.Errorf("read root directory: %w", err)
	}
	for off := 0; off+32 <= len(root) && root[off] != 0; off += 32 {
		e := root[off : off+32]
		const attrDir, attrLFN = 0x10, 0x0f
		if e[0] == 0xe5 || e[11] == attrLFN || e[11]&attrDir == 0 || e[0] == '.' {
			continue
		}
		sub := uint32(binary.LittleEndian.Uint16(e[20:]))<<16 | uint32(binary.LittleEndian.Uint16(e[26:]))
		dotdot := make([]byte, 32)
		if _, err := d.ReadAt(dotdot, clusterOff(sub)+32); err != nil {
			return fmt.Errorf("read directory at cluster %d: %w", sub, err)
		}
		if string(dotdot[:11]) != "..         " {
			return fmt.Errorf("directory at cluster %d has no '..' entry", sub)
		}
		binary.LittleEndian.PutUint16(dotdot[20:], 0)
		binary.LittleEndian.PutUint16(dotdot[26:], 0)
		if _, err := d.WriteAt(dotdot, clusterOff(sub)+32); err != nil {
			return fmt.Errorf("write directory at cluster %d: %w", sub, err)
		}
	}

	free, next := uint32(0), uint32(0xffffffff)
	for c := uint32(2); c < clusters+2 && int(4*c+4) <= len(fat); c++ {
		if entry(c) == 0 {
			free++
			if next == 0xffffffff {
				next = c
			}
		}
	}
	info := make([]byte, 8)
	binary.LittleEndian.PutUint32(info[0:], free)
	binary.LittleEndian.PutUint32(info[4:], next)
	if _, err := d.WriteAt(info, start+fsInfoSector*bytesPerSector+488); err != nil {
		return fmt.Errorf("write FSInfo: %w", err)
	}
	return nil
}
