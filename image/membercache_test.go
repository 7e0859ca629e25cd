package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTree is a small root with the three members' kinds of files: a Go
// binary as /init, a library, and the image's release and seed.
func testTree(t *testing.T, seed string) *tree {
	t.Helper()
	tr := newTree()
	for _, d := range []string{"etc", "etc/etcdbox", "lib"} {
		require.NoError(t, tr.dir(d, 0o755))
	}
	sample := goBinarySample(t)
	require.NoError(t, tr.bytes("init", sample[:1<<20], 0o755))
	require.NoError(t, tr.bytes("lib/libx.so", sample[1<<20:3<<19], 0o755))
	require.NoError(t, tr.bytes(releaseFile, []byte("version=test\n"), 0o644))
	if seed != "" {
		require.NoError(t, tr.bytes(seedFile, []byte(seed), 0o600))
	}
	return tr
}

// cached lists the frames in a cache directory.
func cached(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+cacheExt))
	require.NoError(t, err)
	return m
}

// TestInitrdMemberCache: a second build from the same parts takes the
// frames of /init and the rest from the cache, byte for byte; the member
// with the seed is never kept; a damaged frame is noticed and replaced;
// a cache that cannot be written warns and the build goes on.
func TestInitrdMemberCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const secret = "token: s3cr3t-not-for-the-cache\n"
	tr := testTree(t, secret)
	dir := t.TempDir()
	cfg := Config{Compression: CompressionSmall, CacheDir: dir, SourceDateEpoch: 1}
	build := func() ([]byte, InitrdInfo) {
		var b bytes.Buffer
		info, err := writeInitrd(ctx, &b, tr, nil, cfg)
		require.NoError(t, err)
		assert.Empty(t, info.Warnings)
		return b.Bytes(), info
	}
	first, info := build()
	assert.Regexp(t, `^zstd \d+\.\d+\.\d+ -19`, info.Compressor)
	assert.Equal(t, []bool{false, false, false}, info.Cached)
	frames := cached(t, dir)
	require.Len(t, frames, 2, "the rest and /init, not the seed's member")
	d, err := zstd.NewReader(nil)
	require.NoError(t, err)
	defer d.Close()
	for _, f := range frames {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		archive, err := d.DecodeAll(b, nil)
		require.NoError(t, err)
		assert.NotContains(t, string(archive), "s3cr3t", "%s holds the seed", f)
	}

	second, info := build()
	assert.Equal(t, []bool{true, true, false}, info.Cached)
	assert.True(t, bytes.Equal(first, second), "a cached build is byte for byte the same")

	// Each kept frame replaced with the other's: both decode, to the
	// wrong archive.
	a, err := os.ReadFile(frames[0])
	require.NoError(t, err)
	b, err := os.ReadFile(frames[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(frames[0], b, 0o644))
	require.NoError(t, os.WriteFile(frames[1], a[:len(a)/2], 0o644))
	third, info := build()
	assert.Equal(t, []bool{false, false, false}, info.Cached)
	assert.True(t, bytes.Equal(first, third), "damaged frames are compressed again, not used")
	_, info = build()
	assert.Equal(t, []bool{true, true, false}, info.Cached, "and replaced")

	// A cache directory that is a file: the build warns and goes on.
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	cfg.CacheDir = notDir
	var out bytes.Buffer
	info, err = writeInitrd(ctx, &out, tr, nil, cfg)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(first, out.Bytes()))
	require.Len(t, info.Warnings, 2)
	assert.Contains(t, info.Warnings[0], "initrd cache: ")
	assert.Contains(t, info.Warnings[0], notDir)
}

// TestInitrdMemberCacheOnce: two builds of the same parts at once run
// the program over each member once; the other build waits and takes the
// frames from the cache.
func TestInitrdMemberCacheOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := testTree(t, "")
	cfg := Config{Compression: CompressionSmall, CacheDir: t.TempDir(), SourceDateEpoch: 1}
	var infos [2]InitrdInfo
	var outs [2]bytes.Buffer
	var wg sync.WaitGroup
	for i := range infos {
		wg.Go(func() {
			var err error
			infos[i], err = writeInitrd(ctx, &outs[i], tr, nil, cfg)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	require.Len(t, infos[0].Cached, 3)
	for m := range 2 {
		assert.True(t, infos[0].Cached[m] != infos[1].Cached[m], "member %d: compressed by one build, taken from the cache by the other (%v, %v)", m, infos[0].Cached, infos[1].Cached)
	}
	assert.True(t, bytes.Equal(outs[0].Bytes(), outs[1].Bytes()))
}

// TestMemberCachePrune: beyond cacheKeep frames the least recently used
// go; a frame read is used again; nothing else in the directory is
// touched.
func TestMemberCachePrune(t *testing.T) {
	dir := t.TempDir()
	c := &memberCache{dir: dir}
	other := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(other, []byte("mine"), 0o644))
	var zw bytes.Buffer
	enc, err := zstd.NewWriter(&zw)
	require.NoError(t, err)
	archive := []byte("archive")
	frame := enc.EncodeAll(archive, nil)
	base := time.Now().Add(-time.Hour)
	var keys []string
	for i := range cacheKeep + 2 {
		key := c.key("test", fmt.Appendf(nil, "%d", i))
		keys = append(keys, key)
		require.NoError(t, c.put(key, frame))
		at := base.Add(time.Duration(i) * time.Minute)
		require.NoError(t, os.Chtimes(c.path(key), at, at))
		if i == 0 {
			_, ok := c.get(key, archive) // used: now the newest
			require.True(t, ok)
		}
	}
	require.NoError(t, c.prune())
	left := cached(t, dir)
	assert.Len(t, left, cacheKeep)
	joined := strings.Join(left, " ")
	assert.NotContains(t, joined, keys[1], "the least recently used went")
	assert.NotContains(t, joined, keys[2])
	assert.Contains(t, joined, keys[0], "the one read stays")
	assert.Contains(t, joined, keys[len(keys)-1])
	assert.FileExists(t, other)
}
