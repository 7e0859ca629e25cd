package image

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goBinarySample is the first 6 MiB of this test's binary: Go code and
// data, as /init is.
func goBinarySample(t *testing.T) []byte {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	in, err := os.ReadFile(exe)
	require.NoError(t, err)
	return in[:min(len(in), 6<<20)]
}

// TestZstdProgram: the host's zstd (hack/deps.sh installs it) is found,
// and its frame of Go code decodes within the kernel's window and is
// smaller than the built-in encoder's best, which is why the build uses it.
func TestZstdProgram(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, why, err := findZstd(ctx, "")
	require.NoError(t, err)
	require.NotNil(t, p, "no zstd program: %s (hack/deps.sh installs one)", why)
	assert.Regexp(t, regexp.MustCompile(`^\d+\.\d+\.\d+$`), p.version)
	assert.Equal(t, "zstd "+p.version+" -19 --single-thread", p.id(false))
	assert.Equal(t, "zstd "+p.version+" -19 --single-thread --long=25", p.id(true))

	// On Go code, level 19 makes a smaller frame than the built-in
	// encoder's best, within level 19's own 8 MiB window.
	code := goBinarySample(t)
	frame, err := p.compress(ctx, code, false)
	require.NoError(t, err)
	require.NoError(t, checkFrame(frame, code))
	var h zstd.Header
	require.NoError(t, h.Decode(frame))
	assert.LessOrEqual(t, h.WindowSize, uint64(8<<20), "level 19's own window")
	assert.Less(t, len(frame), len(builtinFrame(t, CompressionSmall, code)), "the program's frame is smaller than the built-in encoder's best")

	// Go code, 4 MiB of noise, then the first 2 MiB again: a repeat
	// further back than level 19's own window reaches, which the wide
	// window finds (a separate etcd's code in /init's).
	in := append(append(slices.Clone(code), make([]byte, 4<<20)...), code[:2<<20]...)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(in[len(code) : len(code)+4<<20])
	narrow, err := p.compress(ctx, in, false)
	require.NoError(t, err)
	wide, err := p.compress(ctx, in, true)
	require.NoError(t, err)
	require.NoError(t, checkFrame(wide, in))
	require.NoError(t, h.Decode(wide))
	assert.Greater(t, h.WindowSize, uint64(8<<20), "a wide window reaches further")
	assert.LessOrEqual(t, h.WindowSize, uint64(smallWindow), "the window the kernel must allocate")
	assert.Less(t, len(wide), len(narrow)-(512<<10), "the repeat 10 MiB back is found only with the wide window")
}

// builtinFrame is c's built-in encoder's frame of in, as the build
// writes it (Compression.writer).
func builtinFrame(t *testing.T, c Compression, in []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := c.writer(&b)
	require.NoError(t, err)
	_, err = zw.Write(in)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// fakeZstd writes an executable script named zstd into a new directory
// and returns the directory.
func fakeZstd(t *testing.T, script string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zstd"), []byte("#!/bin/sh\n"+script), 0o755))
	return dir
}

// TestFindZstd: a program on PATH that does not work is passed over with
// the reason; one named outright that does not work fails the build,
// named; "none" is the built-in encoder.
func TestFindZstd(t *testing.T) {
	ctx := context.Background()
	cat, err := exec.LookPath("cat") // the fakes run with PATH set to their directory
	require.NoError(t, err)
	// Prints a version, then copies its input: not a zstd frame.
	copies := fakeZstd(t, `[ "$1" = -V ] && { echo "*** zstd command line interface 64-bits v9.9.9, by Yann Collet ***"; exit 0; }; exec `+cat+"\n")
	// Refuses the arguments, as a zstd too old for them would.
	old := fakeZstd(t, `[ "$1" = -V ] && { echo "v1.3.0"; exit 0; }; echo "Incorrect parameter: --single-thread" >&2; exit 1`+"\n")
	// No version.
	silent := fakeZstd(t, "exit 0\n")

	p, why, err := findZstd(ctx, ZstdNone)
	require.NoError(t, err)
	assert.Nil(t, p)
	assert.Contains(t, why, "none")

	for _, c := range []struct{ dir, why string }{
		{t.TempDir(), "no zstd program on PATH"},
		{copies, "its output does not decode"},
		{old, "Incorrect parameter: --single-thread"},
		{silent, "no version"},
	} {
		t.Setenv("PATH", c.dir)
		p, why, err := findZstd(ctx, "")
		require.NoError(t, err, c.dir)
		assert.Nil(t, p, c.why)
		assert.Contains(t, why, c.why)

		if c.why == "no zstd program on PATH" {
			continue
		}
		named := filepath.Join(c.dir, "zstd")
		_, _, err = findZstd(ctx, named)
		if assert.Error(t, err, c.why) {
			assert.Contains(t, err.Error(), named)
			assert.Contains(t, err.Error(), c.why)
		}
	}
	_, _, err = findZstd(ctx, "/nonexistent/zstd")
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "/nonexistent/zstd")
	}

	// A build without a working program uses the built-in encoder and
	// says why.
	t.Setenv("PATH", old)
	tr := testTree(t, "")
	var b bytes.Buffer
	info, err := writeInitrd(ctx, &b, tr, nil, Config{Compression: CompressionSmall, CacheDir: t.TempDir()})
	require.NoError(t, err)
	assert.Contains(t, info.Compressor, "built-in zstd, best level")
	assert.Contains(t, info.Compressor, "Incorrect parameter")
	assert.Equal(t, []bool{false, false, false}, info.Cached)
	// Named outright, it fails the build.
	_, err = writeInitrd(ctx, &b, tr, nil, Config{Compression: CompressionSmall, Zstd: filepath.Join(old, "zstd")})
	assert.ErrorContains(t, err, "Incorrect parameter")
}
