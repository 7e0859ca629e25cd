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
	f, err := readFAT32(d, start)
	if err != nil {
		return err
	}
	if err := f.setSerial(serial); err != nil {
		return err
	}
	fat := make([]byte, f.fatSectors*f.bytesPerSector)
	if _, err := d.ReadAt(fat, f.fatStart()); err != nil {
		return fmt.Errorf("read FAT: %w", err)
	}
	if fatEntry(fat, f.rootCluster) < 0x0ffffff8 {
		return fmt.Errorf("root directory spans several clusters; fixFAT32 handles one")
	}
	if err := f.fixDotDots(); err != nil {
		return err
	}
	return f.writeFSInfo(fat)
}

// fat32 is a FAT32 filesystem at byte offset start of d, with the layout
// its boot sector gives.
type fat32 struct {
	d              fatDisk
	start          int64
	bytesPerSector int64
	perCluster     int64 // bytes per cluster
	reserved       int64 // sectors before the first FAT
	fats           int64
	totalSectors   int64
	fatSectors     int64 // sectors per FAT
	rootCluster    uint32
	fsInfoSector   int64
	backupSector   int64 // of the boot sector's backup
}

// readFAT32 reads and checks the boot sector of the FAT32 at start.
func readFAT32(d fatDisk, start int64) (*fat32, error) {
	bs := make([]byte, 512)
	if _, err := d.ReadAt(bs, start); err != nil {
		return nil, fmt.Errorf("read boot sector: %w", err)
	}
	bytesPerSector := int64(binary.LittleEndian.Uint16(bs[0x0b:]))
	f := &fat32{
		d:              d,
		start:          start,
		bytesPerSector: bytesPerSector,
		perCluster:     int64(bs[0x0d]) * bytesPerSector,
		reserved:       int64(binary.LittleEndian.Uint16(bs[0x0e:])),
		fats:           int64(bs[0x10]),
		totalSectors:   int64(binary.LittleEndian.Uint32(bs[0x20:])),
		fatSectors:     int64(binary.LittleEndian.Uint32(bs[0x24:])),
		rootCluster:    binary.LittleEndian.Uint32(bs[0x2c:]),
		fsInfoSector:   int64(binary.LittleEndian.Uint16(bs[0x30:])),
		backupSector:   int64(binary.LittleEndian.Uint16(bs[0x32:])),
	}
	if f.bytesPerSector == 0 || f.perCluster == 0 || f.fats == 0 || binary.LittleEndian.Uint16(bs[0x1fe:]) != 0xaa55 {
		return nil, fmt.Errorf("no FAT32 boot sector at offset %d", start)
	}
	return f, nil
}

// fatStart is the byte offset on the disk of the first FAT.
func (f *fat32) fatStart() int64 {
	return f.start + f.reserved*f.bytesPerSector
}

// clusterOff is the byte offset on the disk of cluster c.
func (f *fat32) clusterOff(c uint32) int64 {
	dataStart := f.fatStart() + f.fats*f.fatSectors*f.bytesPerSector
	return dataStart + int64(c-2)*f.perCluster
}

// clusters is the number of data clusters.
func (f *fat32) clusters() uint32 {
	return uint32((f.totalSectors - f.reserved - f.fats*f.fatSectors) * f.bytesPerSector / f.perCluster)
}

// fatEntry returns the FAT entry of cluster c.
func fatEntry(fat []byte, c uint32) uint32 {
	return binary.LittleEndian.Uint32(fat[4*c:]) & 0x0fffffff
}

// setSerial writes the volume serial number into the boot sector and its
// backup.
func (f *fat32) setSerial(serial uint32) error {
	id := binary.LittleEndian.AppendUint32(nil, serial)
	for _, sec := range []int64{0, f.backupSector} {
		if _, err := f.d.WriteAt(id, f.start+sec*f.bytesPerSector+0x43); err != nil {
			return fmt.Errorf("write volume serial: %w", err)
		}
	}
	return nil
}

// fixDotDots points the ".." entry of each directory in the root, which
// must fit in one cluster, at cluster 0.
func (f *fat32) fixDotDots() error {
	root := make([]byte, f.perCluster)
	if _, err := f.d.ReadAt(root, f.clusterOff(f.rootCluster)); err != nil {
		return fmt.Errorf("read root directory: %w", err)
	}
	for off := 0; off+32 <= len(root) && root[off] != 0; off += 32 {
		e := root[off : off+32]
		const attrDir, attrLFN = 0x10, 0x0f
		if e[0] == 0xe5 || e[11] == attrLFN || e[11]&attrDir == 0 || e[0] == '.' {
			continue
		}
		sub := uint32(binary.LittleEndian.Uint16(e[20:]))<<16 | uint32(binary.LittleEndian.Uint16(e[26:]))
		if err := f.fixDotDot(sub); err != nil {
			return err
		}
	}
	return nil
}

// fixDotDot points the ".." entry of the directory at cluster sub at
// cluster 0.
func (f *fat32) fixDotDot(sub uint32) error {
	dotdot := make([]byte, 32)
	if _, err := f.d.ReadAt(dotdot, f.clusterOff(sub)+32); err != nil {
		return fmt.Errorf("read directory at cluster %d: %w", sub, err)
	}
	if string(dotdot[:11]) != "..         " {
		return fmt.Errorf("directory at cluster %d has no '..' entry", sub)
	}
	binary.LittleEndian.PutUint16(dotdot[20:], 0)
	binary.LittleEndian.PutUint16(dotdot[26:], 0)
	if _, err := f.d.WriteAt(dotdot, f.clusterOff(sub)+32); err != nil {
		return fmt.Errorf("write directory at cluster %d: %w", sub, err)
	}
	return nil
}

// writeFSInfo writes into FSInfo the free-cluster count and the first free
// cluster, counted in fat.
func (f *fat32) writeFSInfo(fat []byte) error {
	clusters := f.clusters()
	free, next := uint32(0), uint32(0xffffffff)
	for c := uint32(2); c < clusters+2 && int(4*c+4) <= len(fat); c++ {
		if fatEntry(fat, c) == 0 {
			free++
			if next == 0xffffffff {
				next = c
			}
		}
	}
	info := make([]byte, 8)
	binary.LittleEndian.PutUint32(info[0:], free)
	binary.LittleEndian.PutUint32(info[4:], next)
	if _, err := f.d.WriteAt(info, f.start+f.fsInfoSector*f.bytesPerSector+488); err != nil {
		return fmt.Errorf("write FSInfo: %w", err)
	}
	return nil
}
