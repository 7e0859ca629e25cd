package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// A fixed VHD is the raw disk followed by a 512-byte footer (Microsoft's
// "Virtual Hard Disk Image Format Specification"); Azure takes only this
// kind, with a virtual size of whole MiB.
const (
	vhdFooterSize = 512
	vhdCookie     = "conectix"
	vhdFixed      = 2
	// vhdEpoch is the footer's time origin, 2000-01-01 00:00:00 UTC.
	vhdEpoch = 946684800
	// vhdCreator names the writing application in the footer. Readers
	// that size a disk by the creator (QEMU does) take "etcb" as an
	// unknown one and use CHS geometry unless told to use the footer's
	// size (driver option force_size_calc=current_size).
	vhdCreator = "etcb"
	vhdHostOS  = 0x5769326B // "Wi2k", as Azure's own tools write
)

// vhdFooter is the decoded footer of a fixed VHD.
type vhdFooter struct {
	Timestamp   uint32
	Creator     string
	OrigSize    uint64
	CurrentSize uint64
	Cylinders   uint16
	Heads       uint8
	Sectors     uint8
	DiskType    uint32
	UniqueID    [16]byte
}

// vhdGeometry is the CHS geometry the specification's algorithm gives a
// disk of size bytes.
func vhdGeometry(size int64) (cyl uint16, heads, spt uint8) {
	total := size / sector
	if total > 65535*16*255 {
		total = 65535 * 16 * 255
	}
	var h, s, cth int64
	if total >= 65535*16*63 {
		s, h = 255, 16
		cth = total / s
	} else {
		s = 17
		cth = total / s
		h = max((cth+1023)/1024, 4)
		if cth >= h*1024 || h > 16 {
			s, h = 31, 16
			cth = total / s
		}
		if cth >= h*1024 {
			s, h = 63, 16
			cth = total / s
		}
	}
	return uint16(cth / h), uint8(h), uint8(s)
}

// encodeVHDFooter returns the footer of a fixed VHD of size bytes.
// uniqueID identifies the disk; equal inputs give equal footers.
func encodeVHDFooter(size, epoch int64, uniqueID [16]byte) []byte {
	b := make([]byte, vhdFooterSize)
	copy(b[0:], vhdCookie)
	be := binary.BigEndian
	be.PutUint32(b[8:], 2)           // features: reserved bit, always set
	be.PutUint32(b[12:], 0x10000)    // format version 1.0
	be.PutUint64(b[16:], ^uint64(0)) // data offset: none, a fixed disk
	be.PutUint32(b[24:], uint32(max(epoch-vhdEpoch, 0)))
	copy(b[28:], vhdCreator)
	be.PutUint32(b[32:], 0x10000) // creator version
	be.PutUint32(b[36:], vhdHostOS)
	be.PutUint64(b[40:], uint64(size))
	be.PutUint64(b[48:], uint64(size))
	c, h, s := vhdGeometry(size)
	be.PutUint16(b[56:], c)
	b[58], b[59] = h, s
	be.PutUint32(b[60:], vhdFixed)
	copy(b[68:], uniqueID[:])
	be.PutUint32(b[64:], vhdChecksum(b))
	return b
}

// vhdChecksum is the ones' complement of the sum of the footer's bytes,
// its checksum field taken as zero.
func vhdChecksum(b []byte) uint32 {
	var sum uint32
	for i, c := range b {
		if i >= 64 && i < 68 {
			continue
		}
		sum += uint32(c)
	}
	return ^sum
}

// parseVHDFooter decodes and checks a fixed VHD's footer: cookie,
// checksum, disk type, and that the geometry is the specification's for
// the size.
func parseVHDFooter(b []byte) (vhdFooter, error) {
	var f vhdFooter
	if len(b) != vhdFooterSize || string(b[:8]) != vhdCookie {
		return f, errors.New("no VHD footer (cookie conectix) in the last 512 bytes")
	}
	be := binary.BigEndian
	if got, want := be.Uint32(b[64:]), vhdChecksum(b); got != want {
		return f, fmt.Errorf("VHD footer checksum %#x, want %#x", got, want)
	}
	f = vhdFooter{
		Timestamp: be.Uint32(b[24:]), Creator: string(b[28:32]),
		OrigSize: be.Uint64(b[40:]), CurrentSize: be.Uint64(b[48:]),
		Cylinders: be.Uint16(b[56:]), Heads: b[58], Sectors: b[59], DiskType: be.Uint32(b[60:]),
	}
	copy(f.UniqueID[:], b[68:84])
	if f.DiskType != vhdFixed {
		return f, fmt.Errorf("VHD disk type %d, want %d (fixed)", f.DiskType, vhdFixed)
	}
	if off := be.Uint64(b[16:]); off != ^uint64(0) {
		return f, fmt.Errorf("VHD data offset %#x: a fixed disk has none", off)
	}
	if c, h, s := vhdGeometry(int64(f.CurrentSize)); c != f.Cylinders || h != f.Heads || s != f.Sectors {
		return f, fmt.Errorf("VHD geometry %d/%d/%d, want %d/%d/%d for %d bytes", f.Cylinders, f.Heads, f.Sectors, c, h, s, f.CurrentSize)
	}
	return f, nil
}

// writeVHD copies the raw disk src to dst and appends the footer. Its
// unique ID is a hash of the disk's first MiB, which holds the GPT and
// its content-derived disk GUID.
func writeVHD(src, dst string, epoch int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if fi.Size()%mib != 0 {
		return fmt.Errorf("the disk is %d bytes; a VHD for Azure must be a whole number of MiB", fi.Size())
	}
	head := make([]byte, mib)
	if _, err := io.ReadFull(in, head); err != nil {
		return err
	}
	var id [16]byte
	sum := sha256.Sum256(append([]byte("etcdbox vhd\n"), head...))
	copy(id[:], sum[:])
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	defer out.Close()
	if _, err := out.Write(head); err != nil {
		return err
	}
	// Copy the rest keeping holes: the DATA placeholder is zeros.
	if err := copySparse(out, in, mib, fi.Size()); err != nil {
		return err
	}
	if _, err := out.WriteAt(encodeVHDFooter(fi.Size(), epoch, id), fi.Size()); err != nil {
		return err
	}
	return out.Sync()
}

// copySparse copies src[off:size] to dst at the same offsets, skipping
// blocks of zeros, which a file created empty reads as zeros.
func copySparse(dst *os.File, src *os.File, off, size int64) error {
	buf := make([]byte, mib)
	zero := make([]byte, mib)
	for ; off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		b := buf[:n]
		if _, err := src.ReadAt(b, off); err != nil {
			return err
		}
		if bytes.Equal(b, zero[:n]) {
			continue
		}
		if _, err := dst.WriteAt(b, off); err != nil {
			return err
		}
	}
	return nil
}
