package image

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
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
	t.Parallel()
	in := goBinarySample(t)
	for _, c := range []Compression{CompressionSmall, CompressionFast} {
		piped := builtinFrame(t, c, in)

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
		assert.True(t, bytes.Equal(single.Bytes(), piped), "%s: the pipeline changes the bytes (%d against %d)", c, len(piped), single.Len())
	}
}

// TestInitrdCompressions: both settings hold the same archive; the
// default is the smaller, and the zstd program's, with level 19's own
// window for /init alone.
func TestInitrdCompressions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds an initramfs; runs without -short")
	}
	small := initrdBytes(t)
	_, smallInfo := unpackedInitrd(t)
	cfg := testConfig(t)
	cfg.Compression = CompressionFast
	var fast bytes.Buffer
	info, err := WriteInitrd(context.Background(), cfg, &fast)
	require.NoError(t, err)
	assert.Equal(t, int64(fast.Len()), info.Size)

	cpio := unzstd(t, small)
	assert.Equal(t, cpio, unzstd(t, fast.Bytes()), "both settings hold the same archive")
	assert.Equal(t, info.Uncompressed, int64(len(cpio)))
	// 9.9% smaller with the init carrying etcd: a twentieth is
	// what this asserts, so that a new etcd or Go does not fail it.
	assert.Less(t, len(small), len(fast.Bytes())*19/20, "the default is at least a twentieth smaller than fast")

	// The default is the zstd program's (hack/deps.sh installs it), and
	// /init's member, one Go program, has level 19's own window: a wider
	// one slows every boot's unpack (zstdArgs; TestZstdProgram checks
	// the wide window of /init beside a separate etcd).
	assert.Regexp(t, `^zstd \d+\.\d+\.\d+ -19 `, smallInfo.Compressor)
	var h zstd.Header
	require.NoError(t, h.Decode(small[smallInfo.Members[0]:]))
	assert.LessOrEqual(t, h.WindowSize, uint64(8<<20), "level 19's own window")
}

// TestCpioParts: the Go binaries are the second member, side by side;
// the image's own files (release, seed) the third, never cached; the
// first holds everything else, every directory before what it holds, and
// every directory of the others' entries.
func TestCpioParts(t *testing.T) {
	tr := newTree()
	for _, d := range []string{"etc", "etc/etcdbox", "lib", "usr/bin"} {
		require.NoError(t, tr.dir(d, 0o755))
	}
	for _, f := range []string{"etc/a", "etc/etcdbox/release", "etc/etcdbox/seed.yaml", "init", "lib/z", "usr/bin/etcd", "usr/bin/zz"} {
		require.NoError(t, tr.bytes(f, []byte(f), 0o644))
	}
	parts := cpioParts(tr)
	require.Len(t, parts, 3)
	var paths [3][]string
	for i, p := range parts {
		for _, n := range p.nodes {
			paths[i] = append(paths[i], n.path)
		}
	}
	assert.Equal(t, []string{"init", "usr/bin/etcd"}, paths[1])
	assert.Equal(t, []string{"etc/etcdbox/release", "etc/etcdbox/seed.yaml"}, paths[2])
	assert.Equal(t, []bool{true, true, false}, []bool{parts[0].keep, parts[1].keep, parts[2].keep}, "the seed's member is never kept")
	assert.True(t, parts[1].wide, "/init and a separate etcd share a window")
	assert.False(t, parts[0].wide || parts[2].wide)
	seen := map[string]bool{"": true}
	for _, p := range slices.Concat(paths[:]...) {
		dir := p[:max(strings.LastIndex(p, "/"), 0)]
		assert.True(t, seen[dir], "/%s comes before its directory /%s in %v", p, dir, paths)
		seen[p] = true
	}
	assert.Len(t, seen, len(tr.sorted())+1, "every entry once")

	// An etcd that is a link to /init stays with the rest.
	tr = newTree()
	require.NoError(t, tr.bytes("init", []byte("init"), 0o755))
	require.NoError(t, tr.symlink("usr/bin/etcd", etcdLink))
	parts = cpioParts(tr)
	require.Len(t, parts, 2)
	require.Len(t, parts[1].nodes, 1)
	assert.Equal(t, "init", parts[1].nodes[0].path)
	assert.False(t, parts[1].wide, "/init alone needs no wide window")
}

// TestInitrdMembers: the initrd is its members one after the other, each
// a zstd frame holding one whole archive that ends on its trailer (what
// the kernel requires of each compressed member), the inodes numbered
// on across them; the second holds /init alone, the third the release.
func TestInitrdMembers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds an initramfs; runs without -short")
	}
	cfg := testConfig(t)
	var b bytes.Buffer
	info, err := WriteInitrd(context.Background(), cfg, &b)
	require.NoError(t, err)
	require.Len(t, info.Members, 3)
	assert.Equal(t, info.Size, info.Members[0]+info.Members[1]+info.Members[2])
	assert.Equal(t, int64(b.Len()), info.Size)
	var total int64
	var inodes []uint32
	rest := b.Bytes()
	for i, n := range info.Members {
		member := rest[:n]
		rest = rest[n:]
		archive := unzstd(t, member) // the host's zstd: one frame, alone
		total += int64(len(archive))
		headers := parseNewc(t, archive) // fails on bytes after a trailer, or none
		require.NotEmpty(t, headers)
		for _, h := range headers {
			inodes = append(inodes, h.ino)
		}
		if i == 1 {
			require.Len(t, headers, 1)
			assert.Equal(t, "init", headers[0].name)
		}
		if i == 2 {
			require.Len(t, headers, 1)
			assert.Equal(t, releaseFile, headers[0].name)
		}
	}
	assert.Equal(t, info.Uncompressed, total)
	for i, ino := range inodes {
		assert.Equal(t, uint32(i+1), ino, "inodes numbered in order across the members")
	}
}
