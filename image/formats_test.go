package image

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// qemuImgRun runs qemu-img and returns its standard output.
func qemuImgRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(qemuImg, args...).Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "qemu-img %s: %s%s", strings.Join(args, " "), out, stderr)
	return string(out)
}

// buildFormat builds the test image in format into dir/name, with the
// fast initrd compression: these tests check the disk's container, and
// the other builder tests check the default initrd.
func buildFormat(t *testing.T, format Format, dir, name string) string {
	t.Helper()
	cfg := testConfig(t)
	cfg.Format, cfg.Output, cfg.Compression = format, filepath.Join(dir, name), CompressionFast
	_, err := Build(context.Background(), cfg)
	require.NoError(t, err, "build --format %s", format)
	return cfg.Output
}

// TestDiskFormats builds every cloud and hypervisor format twice, checks
// each with its format's own checker, and reads its disk back to the
// raw image's bytes.
func TestDiskFormats(t *testing.T) {
	t.Parallel()
	raw := buildFormat(t, FormatRaw, t.TempDir(), "etcdbox.img")
	rawSum := contentDigest(t, raw)
	fi, err := os.Stat(raw)
	require.NoError(t, err)
	rawSize := fi.Size()
	require.Zero(t, rawSize%(1<<30), "the default size suits every format, so each disk can equal the raw one")

	for _, tc := range []struct {
		format Format
		name   string
		// diskOf returns the path of the format's disk as raw bytes.
		diskOf func(t *testing.T, path string) string
	}{
		{FormatQCOW2, "etcdbox.qcow2", func(t *testing.T, p string) string { return checkQemuImg(t, p, "qcow2", rawSize) }},
		{FormatVMDK, "etcdbox.vmdk", func(t *testing.T, p string) string { return checkVMDK(t, p, rawSize) }},
		{FormatVHD, "etcdbox.vhd", func(t *testing.T, p string) string { return checkVHD(t, p, rawSize) }},
		{FormatGCE, "etcdbox.tar.gz", func(t *testing.T, p string) string { return checkGCE(t, p) }},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			a := buildFormat(t, tc.format, t.TempDir(), tc.name)
			b := buildFormat(t, tc.format, t.TempDir(), tc.name)
			assert.Equal(t, contentDigest(t, a), contentDigest(t, b), "two builds of equal inputs differ")
			fa, err := os.Stat(a)
			require.NoError(t, err)
			t.Logf("%s: %d bytes", tc.format, fa.Size())
			assert.Equal(t, rawSum, contentDigest(t, tc.diskOf(t, a)), "the %s disk does not read back to the raw image", tc.format)
		})
	}
}

// checkQemuImg runs qemu-img check and info on path, then converts it
// to raw and returns that file.
func checkQemuImg(t *testing.T, path, format string, size int64, opts ...string) string {
	t.Helper()
	qemuImgRun(t, "check", "-q", "-f", format, path)
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	require.NoError(t, json.Unmarshal([]byte(qemuImgRun(t, "info", "--output=json", "-f", format, path)), &info))
	assert.Equal(t, format, info.Format)
	assert.Equal(t, size, info.VirtualSize, "virtual size")
	out := filepath.Join(t.TempDir(), "disk.raw")
	qemuImgRun(t, append([]string{"convert", "-f", format, "-O", "raw"}, append(opts, path, out)...)...)
	return out
}

// checkVMDK checks a stream-optimized VMDK's descriptor: it names its
// own file, and qemu-img reads it.
func checkVMDK(t *testing.T, path string, size int64) string {
	t.Helper()
	head := make([]byte, 4096)
	f, err := os.Open(path)
	require.NoError(t, err)
	_, err = io.ReadFull(f, head)
	f.Close()
	require.NoError(t, err)
	desc := strings.TrimRight(string(head[512:]), "\x00")
	assert.True(t, strings.Contains(desc, `createType="streamOptimized"`), "descriptor:\n%s", desc)
	assert.True(t, strings.Contains(desc, `SPARSE "`+filepath.Base(path)+`"`), "the extent names a file that is not this one:\n%s", desc)
	assert.Regexp(t, `\nCID=[0-9a-f]{8}\n`, desc)
	return checkQemuImg(t, path, "vmdk", size)
}

// checkVHD checks a fixed VHD's footer and geometry, and that its data
// is the disk; qemu-img reads it with the footer's size.
func checkVHD(t *testing.T, path string, size int64) string {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, size+vhdFooterSize, fi.Size(), "a fixed VHD is the disk and a 512-byte footer")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	foot := make([]byte, vhdFooterSize)
	_, err = f.ReadAt(foot, size)
	require.NoError(t, err)
	ft, err := parseVHDFooter(foot)
	require.NoError(t, err)
	assert.Equal(t, uint64(size), ft.CurrentSize)
	assert.Equal(t, uint64(size), ft.OrigSize)
	assert.Zero(t, ft.CurrentSize%mib, "Azure takes only whole MiB")
	assert.Equal(t, uint32(testEpoch-vhdEpoch), ft.Timestamp)
	out := filepath.Join(t.TempDir(), "disk.raw")
	qemuImgRun(t, "convert", "--image-opts", "driver=vpc,force_size_calc=current_size,file.filename="+path, "-O", "raw", out)
	return out
}

// checkGCE checks that a GCE image is a gzipped GNU tarball holding only
// disk.raw, of whole GiB, and returns disk.raw unpacked.
func checkGCE(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(zr)
	hdr, err := tr.Next()
	require.NoError(t, err)
	assert.Equal(t, "disk.raw", hdr.Name)
	assert.Equal(t, byte(tar.TypeReg), hdr.Typeflag)
	assert.NotZero(t, hdr.Format&tar.FormatGNU, "tar format %v, want GNU", hdr.Format)
	assert.Zero(t, hdr.Size%(1<<30), "GCE takes only whole GiB")
	out := filepath.Join(t.TempDir(), "disk.raw")
	w, err := os.Create(out)
	require.NoError(t, err)
	n, err := io.Copy(w, tr)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, hdr.Size, n)
	_, err = tr.Next()
	assert.Equal(t, io.EOF, err, "disk.raw must be the tarball's only file")
	return out
}

// TestFormatSizes: a vhd's size rounds up to whole MiB, a gce's to whole
// GiB; raw keeps the size it is given.
func TestFormatSizes(t *testing.T) {
	base := testConfig(t)
	base.Output = filepath.Join(t.TempDir(), "out")
	odd := int64(MinSize) + 7*sector
	for format, want := range map[Format]int64{
		FormatRaw: odd, FormatQCOW2: odd, FormatVMDK: odd,
		FormatVHD: (odd/mib + 1) * mib, FormatGCE: 1 << 30,
	} {
		cfg := base
		cfg.Format, cfg.Size = format, odd
		got, err := cfg.check(true)
		require.NoError(t, err, "format %s", format)
		assert.Equal(t, want, got.Size, "format %s", format)
	}
}

// TestUnknownFormat: the error names the format and the choices.
func TestUnknownFormat(t *testing.T) {
	cfg := testConfig(t)
	cfg.Format, cfg.Output = "vdi", filepath.Join(t.TempDir(), "out")
	_, err := Build(context.Background(), cfg)
	require.Error(t, err)
	for _, want := range []string{`"vdi"`, "raw", "oci", "qcow2", "vhd", "gce", "vmdk"} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = os.Stat(cfg.Output)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing is written")
}

// TestVHDFooter: a footer encodes and decodes, and a damaged one is
// refused with what is wrong.
func TestVHDFooter(t *testing.T) {
	var id [16]byte
	copy(id[:], "0123456789abcdef")
	b := encodeVHDFooter(1<<30, testEpoch, id)
	f, err := parseVHDFooter(b)
	require.NoError(t, err)
	assert.Equal(t, uint64(1<<30), f.CurrentSize)
	assert.Equal(t, id, f.UniqueID)
	// The specification's geometry for 1 GiB: 2080 cylinders, 16 heads,
	// 63 sectors per track.
	assert.Equal(t, []int{2080, 16, 63}, []int{int(f.Cylinders), int(f.Heads), int(f.Sectors)})

	bad := append([]byte(nil), b...)
	bad[50] ^= 1
	_, err = parseVHDFooter(bad)
	assert.ErrorContains(t, err, "checksum")
	_, err = parseVHDFooter(make([]byte, vhdFooterSize))
	assert.ErrorContains(t, err, "conectix")
}
