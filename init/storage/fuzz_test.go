package storage

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// fuzzDisk lays out a disk image of sectors 512-byte sectors from a
// fuzzer's header and partition array, with both CRCs made right, so that
// the fuzzer reaches past the checksums into the geometry: the header's
// own fields are the fuzzer's.
func fuzzDisk(t *testing.T, sectors uint16, header, entries []byte) (string, int64) {
	const ss = 512
	n := int64(sectors%4096) + 4
	disk := make([]byte, n*ss)
	h := make([]byte, ss)
	copy(h, header)
	copy(h, gptSignature)
	le := binary.LittleEndian
	if size := le.Uint32(h[12:]); size < gptMinHeader || size > ss {
		le.PutUint32(h[12:], gptMinHeader)
	}
	entriesLBA := le.Uint64(h[72:])
	arrayLen := uint64(le.Uint32(h[80:])) * uint64(le.Uint32(h[84:]))
	if arrayLen <= gptMaxEntries {
		arr := make([]byte, arrayLen)
		copy(arr, entries)
		le.PutUint32(h[88:], crc32.ChecksumIEEE(arr))
		if off := entriesLBA * ss; entriesLBA < uint64(n) && off < uint64(len(disk)) {
			copy(disk[off:], arr)
		}
	}
	le.PutUint32(h[16:], 0)
	le.PutUint32(h[16:], crc32.ChecksumIEEE(h[:le.Uint32(h[12:])]))
	copy(disk[ss:], h)
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, disk, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, int64(len(disk))
}

// gptEntry is a partition entry named name on LBAs first-last.
func gptEntry(name string, first, last uint64) []byte {
	e := make([]byte, 128)
	e[0] = 1 // a type GUID that is not all zero
	binary.LittleEndian.PutUint64(e[32:], first)
	binary.LittleEndian.PutUint64(e[40:], last)
	for i, r := range utf16.Encode([]rune(name)) {
		binary.LittleEndian.PutUint16(e[gptNameOffset+2*i:], r)
	}
	return e
}

// gptHeaderFields is a header's fields as planGrow reads them.
func gptHeaderFields(alt, firstUsable, lastUsable, entriesLBA uint64, num, size uint32) []byte {
	h := make([]byte, gptMinHeader)
	le := binary.LittleEndian
	le.PutUint32(h[12:], gptMinHeader)
	le.PutUint64(h[24:], 1)
	le.PutUint64(h[32:], alt)
	le.PutUint64(h[40:], firstUsable)
	le.PutUint64(h[48:], lastUsable)
	le.PutUint64(h[72:], entriesLBA)
	le.PutUint32(h[80:], num)
	le.PutUint32(h[84:], size)
	return h
}

// FuzzGrowGPT: whatever the table says, planning the growth of DATA never
// panics, and a plan writes only inside the disk, and grows DATA only
// inside it.
func FuzzGrowGPT(f *testing.F) {
	f.Add(uint16(2048), gptHeaderFields(2047, 34, 2014, 2, 128, 128), gptEntry(DataLabel, 2048, 2047))
	f.Add(uint16(4096), gptHeaderFields(2047, 34, 2014, 2, 128, 128), append(gptEntry(ESPLabel, 34, 1000), gptEntry(DataLabel, 1001, 2000)...))
	f.Add(uint16(8), gptHeaderFields(7, 3, 6, 2, 8192, 128), gptEntry(DataLabel, 3, 6))
	f.Fuzz(func(t *testing.T, sectors uint16, header, entries []byte) {
		path, size := fuzzDisk(t, sectors, header, entries)
		disk, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer disk.Close()
		r, plan, err := planGrow(disk, DataLabel, 512, size, 4096)
		if err != nil {
			return
		}
		for _, w := range plan {
			if w.off < 0 || w.off+int64(len(w.data)) > size {
				t.Fatalf("a write of %d bytes at %d on a disk of %d", len(w.data), w.off, size)
			}
		}
		if r.Changed() && (r.Start < 0 || r.Size <= 0 || r.Start+r.Size > size || r.Size < r.OldSize) {
			t.Fatalf("DATA planned at %d+%d (was %d) on a disk of %d", r.Start, r.Size, r.OldSize, size)
		}
	})
}

// FuzzProbe: the DATA probe and the superblock's size reader never panic
// on any content, and a size they report fits the partition they read.
func FuzzProbe(f *testing.F) {
	sb := make([]byte, 2048)
	binary.LittleEndian.PutUint16(sb[sbOffset+sbMagicOff:], ext4Magic)
	binary.LittleEndian.PutUint32(sb[sbOffset+0x04:], 2)
	f.Add(sb)
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "part")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Probe(p); err != nil {
			t.Fatalf("probe of a readable file: %v", err)
		}
		if n, err := ext4Size(p); err == nil && n < 0 {
			t.Fatalf("a filesystem of %d bytes", n)
		}
	})
}
