package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// digestBlock is the unit contentDigest skips when it holds only zeros:
// the page and filesystem block size, so that a hole starts and ends on
// its edges.
const digestBlock = 4096

// contentDigest is a digest of path's bytes that two files share exactly
// when their bytes are equal: its size, then each digestBlock that is not
// all zeros with its offset. It reads only the file's data, not its holes
// (SEEK_DATA), so a 1 GiB disk image with 20 MiB written costs what the
// 20 MiB do: the image tests compare many such disks, and hashing every
// zero of each took most of their time. A block of zeros counts the same
// in a hole or written out, so a copy that kept no holes digests alike.
func contentDigest(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi, err := f.Stat()
	require.NoError(t, err)
	size := fi.Size()
	h := sha256.New()
	var word [8]byte
	binary.BigEndian.PutUint64(word[:], uint64(size))
	h.Write(word[:])
	zero := make([]byte, digestBlock)
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		start, err := f.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		require.NoError(t, err)
		end, err := f.Seek(start, unix.SEEK_HOLE)
		require.NoError(t, err)
		// Whole blocks, so that each is read once and alike in every
		// layout: data found mid-block belongs to its block.
		pos := start - start%digestBlock
		end = min(size, (end+digestBlock-1)/digestBlock*digestBlock)
		for pos < end {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos)
			if err != nil && !errors.Is(err, io.EOF) {
				require.NoError(t, err)
			}
			if n == 0 {
				break
			}
			for b := 0; b < n; b += digestBlock {
				blk := buf[b:min(b+digestBlock, n)]
				if bytes.Equal(blk, zero[:len(blk)]) {
					continue
				}
				binary.BigEndian.PutUint64(word[:], uint64(pos+int64(b)))
				h.Write(word[:])
				h.Write(blk)
			}
			pos += int64(n)
		}
		off = end
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestContentDigest: files with equal bytes digest alike whether their
// zeros are holes or written; a byte changed anywhere, a block moved, or
// a longer run of zeros at the end each changes the digest.
func TestContentDigest(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int64, at map[int64][]byte, dense bool) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		require.NoError(t, err)
		defer f.Close()
		if dense {
			_, err = f.Write(make([]byte, size))
			require.NoError(t, err)
		} else {
			require.NoError(t, f.Truncate(size))
		}
		for off, b := range at {
			_, err := f.WriteAt(b, off)
			require.NoError(t, err)
		}
		return p
	}
	const size = 8 << 20
	data := map[int64][]byte{0: []byte("start"), 3<<20 + 100: bytes.Repeat([]byte{7}, 10000), size - 1: {1}}
	sparse := write("sparse", size, data, false)
	dense := write("dense", size, data, true)
	assert.Equal(t, contentDigest(t, sparse), contentDigest(t, dense), "the same bytes, in holes or written")
	changed := map[int64][]byte{0: []byte("start"), 3<<20 + 100: bytes.Repeat([]byte{7}, 10000), size - 1: {2}}
	assert.NotEqual(t, contentDigest(t, sparse), contentDigest(t, write("changed", size, changed, false)), "the last byte changed")
	moved := map[int64][]byte{0: []byte("start"), 3<<20 + 101: bytes.Repeat([]byte{7}, 10000), size - 1: {1}}
	assert.NotEqual(t, contentDigest(t, sparse), contentDigest(t, write("moved", size, moved, false)), "a run moved by a byte")
	assert.NotEqual(t, contentDigest(t, write("short", size, nil, false)), contentDigest(t, write("long", size+1, nil, false)), "one zero more")
}
