package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"unicode/utf16"
)

// DefaultAlign is where a grown partition ends: on a 1 MiB boundary, like
// the builder's layout and parted/sfdisk.
const DefaultAlign = 1 << 20

const (
	gptSignature   = "EFI PART"
	gptMinHeader   = 92
	gptMaxEntries  = 1 << 20 // bytes; the usual array is 16 KiB
	gptNameOffset  = 56
	gptNameBytes   = 72
	mbrTableOffset = 446
	mbrTypeGPT     = 0xEE
)

// Resize says what GrowGPT did to a partition. Sizes are in bytes.
type Resize struct {
	Number     int   // partition number (1-based), as the kernel counts
	Start      int64 // offset of the partition on the disk
	OldSize    int64 // partition size before
	Size       int64 // partition size now
	Grown      bool  // the partition's last LBA moved
	Relocated  bool  // the backup GPT moved to the disk's end
	SectorSize int64
}

// Changed reports whether GrowGPT wrote to the disk.
func (r Resize) Changed() bool { return r.Grown || r.Relocated }

// gptHeader is a GPT header sector with its fields decoded; encode writes
// them back into raw so reserved bytes survive.
type gptHeader struct {
	raw                   []byte // one logical sector
	size                  uint32 // header size
	myLBA, altLBA         uint64
	firstUsable, lastUsbl uint64
	entriesLBA            uint64
	numEntries, entrySize uint32
	entriesCRC            uint32
}

func parseGPTHeader(sector []byte) (*gptHeader, error) {
	if string(sector[:8]) != gptSignature {
		return nil, errors.New("no GPT signature")
	}
	le := binary.LittleEndian
	h := &gptHeader{raw: bytes.Clone(sector), size: le.Uint32(sector[12:])}
	if h.size < gptMinHeader || int(h.size) > len(sector) {
		return nil, fmt.Errorf("header size %d out of range", h.size)
	}
	if got, want := le.Uint32(sector[16:]), h.crc(); got != want {
		return nil, fmt.Errorf("header CRC32 %#08x, computed %#08x", got, want)
	}
	h.myLBA = le.Uint64(sector[24:])
	h.altLBA = le.Uint64(sector[32:])
	h.firstUsable = le.Uint64(sector[40:])
	h.lastUsbl = le.Uint64(sector[48:])
	h.entriesLBA = le.Uint64(sector[72:])
	h.numEntries = le.Uint32(sector[80:])
	h.entrySize = le.Uint32(sector[84:])
	h.entriesCRC = le.Uint32(sector[88:])
	if h.entrySize < 128 || h.entrySize%8 != 0 || uint64(h.numEntries)*uint64(h.entrySize) > gptMaxEntries {
		return nil, fmt.Errorf("partition array of %d entries of %d bytes", h.numEntries, h.entrySize)
	}
	return h, nil
}

// crc computes the header CRC32 over size bytes with the CRC field zeroed.
func (h *gptHeader) crc() uint32 {
	b := bytes.Clone(h.raw[:h.size])
	clear(b[16:20])
	return crc32.ChecksumIEEE(b)
}

// encode writes the fields into raw and seals it with a fresh CRC.
func (h *gptHeader) encode() []byte {
	le := binary.LittleEndian
	le.PutUint64(h.raw[24:], h.myLBA)
	le.PutUint64(h.raw[32:], h.altLBA)
	le.PutUint64(h.raw[40:], h.firstUsable)
	le.PutUint64(h.raw[48:], h.lastUsbl)
	le.PutUint64(h.raw[72:], h.entriesLBA)
	le.PutUint32(h.raw[88:], h.entriesCRC)
	le.PutUint32(h.raw[16:], h.crc())
	return bytes.Clone(h.raw)
}

// arraySectors is the partition array's length in sectors.
func (h *gptHeader) arraySectors(ss int64) uint64 {
	n := int64(h.numEntries) * int64(h.entrySize)
	return uint64((n + ss - 1) / ss)
}

// GrowGPT grows the partition named name (a GPT partition name such as
// "ETCDBOX-DATA") to the end of the disk or image f, on a DefaultAlign
// boundary, and moves the backup GPT to the disk's last sectors. It is
// idempotent: when both are in place already it writes nothing and returns
// a Resize with Changed() false.
//
// f may be a regular file (512-byte sectors) or a block device (its
// logical sector size). The primary header and both CRCs are verified
// before anything is written; a bad table is an error and f is left
// untouched. The partition must be the last on the disk, and it never
// shrinks.
//
// Writes go backup first (entries, header, fsync), then the primary
// header and entries in one write (fsync), and finally the stale backup
// header at the old end is zeroed. A crash before the primary write
// leaves the old, consistent table; a torn primary write leaves a primary
// with a bad CRC and a good backup at the disk's end, which UEFI firmware
// (EDK2 restores the primary from the backup) and every partitioning tool
// recover from.
//
// The kernel does not see the change until told: see ResizePartition.
func GrowGPT(f *os.File, name string) (Resize, error) {
	ss, size, err := geometry(f)
	if err != nil {
		return Resize{}, fmt.Errorf("grow GPT on %s: %w", f.Name(), err)
	}
	r, plan, err := planGrow(f, name, ss, size, DefaultAlign)
	if err != nil {
		return Resize{}, fmt.Errorf("grow GPT on %s: %w", f.Name(), err)
	}
	if !r.Changed() {
		return r, nil
	}
	if err := plan.apply(f); err != nil {
		return Resize{}, fmt.Errorf("grow GPT on %s: %w", f.Name(), err)
	}
	return r, nil
}

// write is one WriteAt of a plan.
type write struct {
	off  int64
	data []byte
	sync bool // fsync after this write
}

type growPlan []write

func (p growPlan) apply(f *os.File) error {
	for _, w := range p {
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			return err
		}
		if w.sync {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("fsync: %w", err)
			}
		}
	}
	return nil
}

// planGrow reads and checks the table and computes the writes; it writes
// nothing.
func planGrow(f *os.File, name string, ss, size int64, align int64) (Resize, growPlan, error) {
	if ss < 512 || size < 4*ss {
		return Resize{}, nil, fmt.Errorf("disk of %d bytes with %d-byte sectors", size, ss)
	}
	h, entries, err := readPrimaryGPT(f, ss)
	if err != nil {
		return Resize{}, nil, err
	}
	idx, err := lastPartition(h, entries, name)
	if err != nil {
		return Resize{}, nil, err
	}
	le := binary.LittleEndian
	e := entries[idx*int(h.entrySize):][:h.entrySize]
	first, last := le.Uint64(e[32:]), le.Uint64(e[40:])

	// The new geometry: backup header on the last LBA, its array below it.
	lastLBA := uint64(size/ss) - 1
	arr := h.arraySectors(ss)
	if h.altLBA > lastLBA {
		return Resize{}, nil, fmt.Errorf("backup GPT header at LBA %d is beyond the disk's last LBA %d: the disk shrank", h.altLBA, lastLBA)
	}
	lastUsable := lastLBA - arr - 1
	if last > lastUsable || first > last {
		return Resize{}, nil, fmt.Errorf("partition %d spans LBA %d-%d, the disk's last usable LBA is %d", idx+1, first, last, lastUsable)
	}
	alignSectors := uint64(max(align/ss, 1))
	newLast := last
	if end := (lastUsable + 1) / alignSectors * alignSectors; end > 0 && end-1 > last {
		newLast = end - 1
	}
	r := Resize{
		Number:     idx + 1,
		Start:      int64(first) * ss,
		OldSize:    int64(last-first+1) * ss,
		Size:       int64(newLast-first+1) * ss,
		Grown:      newLast != last,
		Relocated:  h.altLBA != lastLBA || h.lastUsbl != lastUsable,
		SectorSize: ss,
	}
	if !r.Changed() {
		return r, nil, nil
	}
	le.PutUint64(e[40:], newLast)
	return r, gptWrites(f, h, entries, ss, lastLBA, lastUsable), nil
}

// readPrimaryGPT reads and checks the primary GPT header and its
// partition array.
func readPrimaryGPT(f *os.File, ss int64) (*gptHeader, []byte, error) {
	sector := make([]byte, ss)
	if _, err := f.ReadAt(sector, ss); err != nil {
		return nil, nil, fmt.Errorf("read GPT header: %w", err)
	}
	h, err := parseGPTHeader(sector)
	if err != nil {
		return nil, nil, fmt.Errorf("primary GPT header at LBA 1: %w", err)
	}
	if h.myLBA != 1 {
		return nil, nil, fmt.Errorf("primary GPT header says it is at LBA %d", h.myLBA)
	}
	if h.entriesLBA < 2 || h.entriesLBA+h.arraySectors(ss) > h.firstUsable || h.firstUsable > h.lastUsbl {
		return nil, nil, fmt.Errorf("primary GPT header: partition array at LBA %d, usable LBAs %d-%d", h.entriesLBA, h.firstUsable, h.lastUsbl)
	}
	entries := make([]byte, int64(h.numEntries)*int64(h.entrySize))
	if _, err := f.ReadAt(entries, int64(h.entriesLBA)*ss); err != nil {
		return nil, nil, fmt.Errorf("read GPT partition array: %w", err)
	}
	if got := crc32.ChecksumIEEE(entries); got != h.entriesCRC {
		return nil, nil, fmt.Errorf("GPT partition array CRC32 %#08x, header says %#08x", got, h.entriesCRC)
	}
	return h, entries, nil
}

// lastPartition returns the index of the partition named name, which must
// be the only one of that name and the last on the disk.
func lastPartition(h *gptHeader, entries []byte, name string) (int, error) {
	le := binary.LittleEndian
	idx := -1
	var maxEnd uint64
	for i := 0; i < int(h.numEntries); i++ {
		e := entries[i*int(h.entrySize):][:h.entrySize]
		if allZero(e[:16]) { // unused entry
			continue
		}
		maxEnd = max(maxEnd, le.Uint64(e[40:]))
		if partName(e) == name {
			if idx >= 0 {
				return -1, fmt.Errorf("two partitions named %q (%d and %d)", name, idx+1, i+1)
			}
			idx = i
		}
	}
	if idx < 0 {
		return -1, fmt.Errorf("no partition named %q", name)
	}
	if last := le.Uint64(entries[idx*int(h.entrySize)+40:]); last != maxEnd {
		return -1, fmt.Errorf("partition %d (%q) is not the last on the disk", idx+1, name)
	}
	return idx, nil
}

// gptWrites is the writes that move the GPT of header h to a disk whose
// last LBA is lastLBA, with the partition array entries (already
// changed): the backup first, then the primary, the protective MBR, and
// the stale backup header zeroed.
func gptWrites(f *os.File, h *gptHeader, entries []byte, ss int64, lastLBA, lastUsable uint64) growPlan {
	arr := h.arraySectors(ss)
	oldAlt, oldLastUsable := h.altLBA, h.lastUsbl
	h.entriesCRC = crc32.ChecksumIEEE(entries)
	h.lastUsbl = lastUsable

	backup := *h
	backup.raw = bytes.Clone(h.raw)
	backup.myLBA, backup.altLBA = lastLBA, 1
	backup.entriesLBA = lastLBA - arr
	primary := h
	primary.myLBA, primary.altLBA = 1, lastLBA

	plan := growPlan{
		write{off: int64(backup.entriesLBA) * ss, data: entries},
		write{off: int64(lastLBA) * ss, data: backup.encode(), sync: true},
	}
	ph := primary.encode()
	if primary.entriesLBA == 2 && int64(len(entries))%ss == 0 { // header and array in one write
		plan = append(plan, write{off: ss, data: append(ph, entries...), sync: true})
	} else {
		plan = append(plan, write{off: int64(primary.entriesLBA) * ss, data: entries}, write{off: ss, data: ph, sync: true})
	}
	// The protective MBR covers the whole disk (or 2 TiB).
	if mbr, ok := protectiveMBR(f, lastLBA); ok {
		plan = append(plan, write{off: mbrTableOffset, data: mbr, sync: true})
	}
	// Zero the stale backup header so no tool finds a second, older GPT
	// inside DATA. It was outside every partition until now.
	if oldAlt > oldLastUsable && oldAlt < backup.entriesLBA {
		plan = append(plan, write{off: int64(oldAlt) * ss, data: make([]byte, ss), sync: true})
	}
	return plan
}

// protectiveMBR returns LBA 0's partition table with the 0xEE entry
// resized to cover the disk, when LBA 0 holds a protective MBR (a single
// 0xEE entry starting at LBA 1). Hybrid MBRs are left alone.
func protectiveMBR(f *os.File, lastLBA uint64) ([]byte, bool) {
	tbl := make([]byte, 64+2)
	if _, err := f.ReadAt(tbl, mbrTableOffset); err != nil || tbl[64] != 0x55 || tbl[65] != 0xAA {
		return nil, false
	}
	le := binary.LittleEndian
	var pmbr []byte
	for i := 0; i < 4; i++ {
		e := tbl[i*16:][:16]
		switch {
		case allZero(e):
		case e[4] == mbrTypeGPT && le.Uint32(e[8:]) == 1 && pmbr == nil:
			pmbr = e
		default:
			return nil, false
		}
	}
	if pmbr == nil {
		return nil, false
	}
	want := uint32(min(lastLBA, 0xFFFFFFFF))
	if le.Uint32(pmbr[12:]) == want {
		return nil, false
	}
	le.PutUint32(pmbr[12:], want)
	return tbl, true
}

// partName decodes an entry's UTF-16LE name.
func partName(e []byte) string {
	raw := e[gptNameOffset:][:gptNameBytes]
	u := make([]uint16, 0, gptNameBytes/2)
	for i := 0; i+1 < len(raw); i += 2 {
		c := binary.LittleEndian.Uint16(raw[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// geometry returns the logical sector size and byte size of f: 512 and
// the file size for a regular file, what the kernel says for a block
// device.
func geometry(f *os.File) (sectorSize, size int64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	if fi.Mode().IsRegular() {
		return 512, fi.Size(), nil
	}
	if fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
		return blockGeometry(f)
	}
	return 0, 0, fmt.Errorf("%s is neither a file nor a block device", f.Name())
}
