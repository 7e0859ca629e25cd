package image

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCompressionCheck(t *testing.T) {
	for in, want := range map[Compression]Compression{"": CompressionSmall, "small": CompressionSmall, "fast": CompressionFast} {
		got, err := in.check()
		require.NoError(t, err, "%q", in)
		assert.Equal(t, want, got, "%q", in)
	}
	for _, bad := range []Compression{"xz", "SMALL", "fast "} {
		_, err := bad.check()
		if assert.Error(t, err, "%q", bad) {
			assert.Contains(t, err.Error(), `compression "`+string(bad)+`"`)
		}
	}
	cfg := testConfig(t)
	cfg.Compression = "gzip"
	_, err := WriteInitrd(context.Background(), cfg, &bytes.Buffer{})
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), `compression "gzip"`)
	}
}

// unzstd inflates b with the host's zstd, a decoder other than the one
// that wrote it.
func unzstd(t *testing.T, b []byte) []byte {
	t.Helper()
	cmd := exec.Command("zstd", "-dcq")
	cmd.Stdin = bytes.NewReader(b)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "zstd -d: %s", errb.String())
	return out.Bytes()
}

// TestPipelinedEncoderSameBytes: the pipelined stream encoder that
// writer returns gives the bytes a single-goroutine encoder gives, for
// both settings, on an input of many blocks (a Go binary, as /init and
// etcd are), so the initrd does not depend on scheduling.
func TestPipelinedEncoderSameBytes(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	in, err := os.ReadFile(exe)
	require.NoError(t, err)
	in = in[:min(len(in), 6<<20)]
	for _, c := range []Compression{CompressionSmall, CompressionFast} {
		var piped bytes.Buffer
		zw, err := c.writer(&piped)
		require.NoError(t, err)
		_, err = zw.Write(in)
		require.NoError(t, err)
		require.NoError(t, zw.Close())

		opts := []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault)}
		if c == CompressionSmall {
			opts = []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(smallWindow)}
		}
		var single bytes.Buffer
		sw, err := zstd.NewWriter(&single, opts...)
		require.NoError(t, err)
		_, err = sw.Write(in)
		require.NoError(t, err)
		require.NoError(t, sw.Close())
		assert.True(t, bytes.Equal(single.Bytes(), piped.Bytes()), "%s: the pipeline changes the bytes (%d against %d)", c, piped.Len(), single.Len())
	}
}

// TestInitrdCompressions: both settings hold the same archive; the
// default is the smaller, with a window the kernel can hold and that
// still reaches from etcd back into /init.
func TestInitrdCompressions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an initramfs; runs without -short")
	}
	small := initrdBytes(t)
	cfg := testConfig(t)
	cfg.Compression = CompressionFast
	var fast bytes.Buffer
	info, err := WriteInitrd(context.Background(), cfg, &fast)
	require.NoError(t, err)
	assert.Equal(t, int64(fast.Len()), info.Size)

	cpio := unzstd(t, small)
	assert.Equal(t, cpio, unzstd(t, fast.Bytes()), "both settings hold the same archive")
	assert.Equal(t, info.Uncompressed, int64(len(cpio)))
	assert.Less(t, len(small), len(fast.Bytes())*9/10, "the default is at least a tenth smaller than fast")

	var h zstd.Header
	require.NoError(t, h.Decode(small))
	assert.LessOrEqual(t, h.WindowSize, uint64(smallWindow), "the window the kernel must allocate")
	assert.Greater(t, h.WindowSize, uint64(initSize(t, cfg.Init)), "the window reaches across /init")
}

// TestCpioOrder: the Go binaries end the archive side by side, and every
// directory still comes before what it holds.
func TestCpioOrder(t *testing.T) {
	tr := newTree()
	for _, d := range []string{"etc", "lib", "usr/bin"} {
		require.NoError(t, tr.dir(d, 0o755))
	}
	for _, f := range []string{"etc/a", "init", "lib/z", "usr/bin/etcd", "usr/bin/zz"} {
		require.NoError(t, tr.bytes(f, []byte(f), 0o644))
	}
	var paths []string
	for _, n := range cpioOrder(tr) {
		paths = append(paths, n.path)
	}
	assert.Equal(t, []string{"init", "usr/bin/etcd"}, paths[len(paths)-2:])
	seen := map[string]bool{"": true}
	for _, p := range paths {
		dir := p[:max(strings.LastIndex(p, "/"), 0)]
		assert.True(t, seen[dir], "/%s comes before its directory /%s in %v", p, dir, paths)
		seen[p] = true
	}
	assert.Len(t, paths, len(tr.sorted()), "every entry once")
}

func initSize(t *testing.T, file string) int64 {
	t.Helper()
	fi, err := os.Stat(file)
	require.NoError(t, err)
	return fi.Size()
}
