package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	mib = int64(1 << 20)
	lba = 512
)

// newImage writes a disk image laid out like the builder's, scaled down:
// ESP at 1 MiB (espMiB long), DATA after it (dataMiB long), and the disk
// ending 1 MiB after DATA, so DATA already reaches the last aligned end.
// It returns the image path. Only the test links go-diskfs.
func newImage(t *testing.T, espMiB, dataMiB int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	size := (1 + espMiB + dataMiB + 1) * mib
	d, err := diskfs.Create(p, size, diskfs.SectorSize512)
	require.NoError(t, err)
	espStart := uint64(mib / lba)
	dataStart := espStart + uint64(espMiB*mib/lba)
	require.NoError(t, d.Partition(&gpt.Table{
		LogicalSectorSize:  lba,
		PhysicalSectorSize: lba,
		ProtectiveMBR:      true,
		Partitions: []*gpt.Partition{
			{Index: 1, Start: espStart, End: dataStart - 1, Type: gpt.EFISystemPartition, Name: ESPLabel},
			{Index: 2, Start: dataStart, End: dataStart + uint64(dataMiB*mib/lba) - 1, Type: gpt.LinuxFilesystem, Name: DataLabel},
		},
	}))
	require.NoError(t, d.Close())
	return p
}

// gptState is what checkGPT read back.
type gptState struct {
	parts                []*gpt.Partition // from go-diskfs
	lastUsable, backupAt uint64
	pmbrSize             uint32
}

// checkGPT verifies an image independently of the code under test: go-diskfs
// reads the primary (no fallback to the backup) and verifies the backup is
// on the last LBA; then both headers and both partition arrays are checked
// by hand (CRCs, cross-references, identical arrays).
func checkGPT(t *testing.T, path string) gptState {
	t.Helper()
	d, err := diskfs.Open(path, diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err)
	defer d.Close()
	pt, err := d.GetPartitionTable()
	require.NoError(t, err)
	tbl := pt.(*gpt.Table)
	require.False(t, tbl.RecoveredFromBackup, "primary GPT must be valid")

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	require.NoError(t, tbl.Verify(f, uint64(fi.Size()/lba*lba)), "go-diskfs: backup header at the disk's end")

	le := binary.LittleEndian
	lastLBA := uint64(fi.Size()/lba) - 1
	readHdr := func(at uint64) ([]byte, []byte) {
		h := make([]byte, lba)
		_, err := f.ReadAt(h, int64(at)*lba)
		require.NoError(t, err)
		require.Equal(t, "EFI PART", string(h[:8]), "header at LBA %d", at)
		hs := le.Uint32(h[12:])
		c := bytes.Clone(h[:hs])
		clear(c[16:20])
		require.Equal(t, crc32.ChecksumIEEE(c), le.Uint32(h[16:]), "header CRC at LBA %d", at)
		require.Equal(t, at, le.Uint64(h[24:]), "MyLBA of header at %d", at)
		arr := make([]byte, le.Uint32(h[80:])*le.Uint32(h[84:]))
		_, err = f.ReadAt(arr, int64(le.Uint64(h[72:]))*lba)
		require.NoError(t, err)
		require.Equal(t, crc32.ChecksumIEEE(arr), le.Uint32(h[88:]), "entries CRC of header at %d", at)
		return h, arr
	}
	ph, parr := readHdr(1)
	require.Equal(t, lastLBA, le.Uint64(ph[32:]), "primary AlternateLBA is the last LBA")
	bh, barr := readHdr(lastLBA)
	require.Equal(t, uint64(1), le.Uint64(bh[32:]), "backup AlternateLBA")
	require.Equal(t, parr, barr, "both partition arrays are identical")
	require.Equal(t, le.Uint64(ph[48:]), le.Uint64(bh[48:]), "LastUsableLBA")
	require.Equal(t, le.Uint64(bh[72:])-1, le.Uint64(bh[48:]), "backup array right after the last usable LBA")
	mbr := make([]byte, lba)
	_, err = f.ReadAt(mbr, 0)
	require.NoError(t, err)
	return gptState{parts: tbl.Partitions, lastUsable: le.Uint64(ph[48:]), backupAt: lastLBA, pmbrSize: le.Uint32(mbr[446+12:])}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return [32]byte(h.Sum(nil))
}

func growFile(t *testing.T, path, name string) (Resize, error) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	return GrowGPT(f, name)
}

func TestGrowGPT(t *testing.T) {
	img := newImage(t, 4, 8) // ESP 1-5 MiB, DATA 5-13 MiB, disk 14 MiB
	st := checkGPT(t, img)
	require.Len(t, st.parts, 2)

	// Mark DATA and the ESP so we can see they keep their bytes.
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("esp-marker"), 1*mib)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("data-marker"), 5*mib)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	type step struct {
		name      string
		size      int64 // truncate the image to this first
		wantGrown bool
		wantMoved bool
		wantEnd   int64 // DATA's end in bytes (exclusive)
	}
	for _, s := range []step{
		{name: "as built: already at the end", size: 14 * mib, wantEnd: 13 * mib},
		{name: "disk enlarged", size: 64 * mib, wantGrown: true, wantMoved: true, wantEnd: 63 * mib},
		{name: "idempotent", size: 64 * mib, wantEnd: 63 * mib},
		{name: "grew less than the alignment", size: 64*mib + 4096, wantMoved: true, wantEnd: 63 * mib},
		{name: "enlarged again, unaligned size", size: 200*mib + 7*lba, wantGrown: true, wantMoved: true, wantEnd: 199 * mib},
		{name: "idempotent again", size: 200*mib + 7*lba, wantEnd: 199 * mib},
	} {
		t.Run(s.name, func(t *testing.T) {
			require.NoError(t, os.Truncate(img, s.size))
			before := fileSum(t, img)
			r, err := growFile(t, img, DataLabel)
			require.NoError(t, err)
			assert.Equal(t, s.wantGrown, r.Grown, "Grown")
			assert.Equal(t, s.wantMoved, r.Relocated, "Relocated")
			assert.Equal(t, 2, r.Number)
			assert.Equal(t, 5*mib, r.Start)
			assert.Equal(t, s.wantEnd-5*mib, r.Size)
			if !r.Changed() {
				assert.Equal(t, before, fileSum(t, img), "no change means no write")
			}

			st := checkGPT(t, img)
			require.Len(t, st.parts, 2)
			esp, data := st.parts[0], st.parts[1]
			assert.Equal(t, ESPLabel, esp.Name)
			assert.Equal(t, uint64(mib/lba), esp.Start)
			assert.Equal(t, uint64(5*mib/lba-1), esp.End, "the ESP is untouched")
			assert.Equal(t, DataLabel, data.Name)
			assert.Equal(t, uint64(5*mib/lba), data.Start)
			assert.Equal(t, uint64(s.wantEnd/lba-1), data.End)
			assert.Zero(t, s.wantEnd%mib, "DATA ends on a MiB boundary")
			assert.LessOrEqual(t, data.End, st.lastUsable)
			assert.Equal(t, uint32(st.backupAt), st.pmbrSize, "protective MBR covers the disk")

			b := make([]byte, 11)
			f, err := os.Open(img)
			require.NoError(t, err)
			defer f.Close()
			_, err = f.ReadAt(b, 1*mib)
			require.NoError(t, err)
			assert.Equal(t, "esp-marker\x00", string(b))
			_, err = f.ReadAt(b, 5*mib)
			require.NoError(t, err)
			assert.Equal(t, "data-marker", string(b))
		})
	}

	t.Run("old backup header zeroed", func(t *testing.T) {
		// The 64 MiB disk's backup header sat on LBA 64 MiB/512 - 1,
		// which is now inside DATA.
		f, err := os.Open(img)
		require.NoError(t, err)
		defer f.Close()
		for _, at := range []int64{14*mib - lba, 64*mib - lba, 64*mib + 4096 - lba} {
			b := make([]byte, 8)
			_, err = f.ReadAt(b, at)
			require.NoError(t, err)
			assert.NotEqual(t, "EFI PART", string(b), "stale header at byte %d", at)
		}
	})
}

func TestGrowGPTRefuses(t *testing.T) {
	le := binary.LittleEndian
	for _, tt := range []struct {
		name    string
		label   string
		size    int64 // truncate to this; 0 keeps 14 MiB
		corrupt func(b []byte)
		wantErr string
	}{
		{name: "header CRC", label: DataLabel, size: 64 * mib,
			corrupt: func(b []byte) { b[lba+40]++ }, wantErr: "primary GPT header at LBA 1: header CRC32"},
		{name: "entries CRC", label: DataLabel, size: 64 * mib,
			corrupt: func(b []byte) { b[2*lba+128+60]++ }, wantErr: "partition array CRC32"},
		{name: "no GPT", label: DataLabel, size: 64 * mib,
			corrupt: func(b []byte) { clear(b[lba : 2*lba]) }, wantErr: "no GPT signature"},
		{name: "absurd array", label: DataLabel, size: 64 * mib,
			corrupt: func(b []byte) {
				h := b[lba : 2*lba]
				le.PutUint32(h[80:], 1<<30)
				reseal(h)
			}, wantErr: "partition array of 1073741824 entries"},
		{name: "not the last partition", label: ESPLabel, size: 64 * mib, wantErr: `partition 1 ("ETCDBOX-ESP") is not the last`},
		{name: "no such partition", label: "NOPE", size: 64 * mib, wantErr: `no partition named "NOPE"`},
		{name: "disk shrank", label: DataLabel, size: 13 * mib, wantErr: "the disk shrank"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			img := newImage(t, 4, 8)
			if tt.corrupt != nil {
				b, err := os.ReadFile(img)
				require.NoError(t, err)
				tt.corrupt(b)
				require.NoError(t, os.WriteFile(img, b, 0o644))
			}
			require.NoError(t, os.Truncate(img, tt.size))
			before := fileSum(t, img)
			_, err := growFile(t, img, tt.label)
			require.ErrorContains(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), img, "the error names the disk")
			assert.Equal(t, before, fileSum(t, img), "the image is untouched")
		})
	}
}

// reseal recomputes a header's CRC after a deliberate edit.
func reseal(h []byte) {
	le := binary.LittleEndian
	c := bytes.Clone(h[:le.Uint32(h[12:])])
	clear(c[16:20])
	le.PutUint32(h[16:], crc32.ChecksumIEEE(c))
}

func TestPartName(t *testing.T) {
	e := make([]byte, 128)
	for i, c := range []uint16{'E', 0xe9, 't', 'c', 'd'} { // non-ASCII survives
		binary.LittleEndian.PutUint16(e[56+2*i:], c)
	}
	assert.Equal(t, "E\u00e9tcd", partName(e))
}
