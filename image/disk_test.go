package image

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRawPartitionTable(t *testing.T) {
	t.Parallel()
	img, _ := rawImage(t)
	fi, err := os.Stat(img)
	require.NoError(t, err)
	assert.Equal(t, int64(DefaultSize), fi.Size(), "disk size")

	d, err := diskfs.Open(img, diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err)
	defer d.Close()
	pt, err := d.GetPartitionTable()
	require.NoError(t, err)
	table, ok := pt.(*gpt.Table)
	require.True(t, ok, "partition table is %T, want GPT", pt)
	assert.True(t, table.ProtectiveMBR, "protective MBR")

	want := []struct {
		label      string
		typ        gpt.Type
		start, len int64 // bytes
	}{
		{"ETCDBOX-ESP", "C12A7328-F81F-11D2-BA4B-00A0C93EC93B", 1 << 20, 512 << 20},
		{"ETCDBOX-DATA", "0FC63DAF-8483-4772-8E79-3D69D8477DE4", 513 << 20, 64 << 20},
	}
	var parts []*gpt.Partition
	for _, p := range table.Partitions {
		if p.Type != gpt.Unused {
			parts = append(parts, p)
		}
	}
	require.Len(t, parts, len(want))
	guids := map[string]bool{table.GUID: true}
	for i, w := range want {
		p := parts[i]
		assert.Equal(t, w.label, p.Name, "partition %d label", i+1)
		assert.Equal(t, w.typ, p.Type, "partition %d type", i+1)
		assert.Equal(t, w.start, p.GetStart(), "partition %d start", i+1)
		assert.Equal(t, w.len, p.GetSize(), "partition %d size", i+1)
		assert.Zero(t, p.GetStart()%(1<<20), "partition %d is not 1 MiB aligned", i+1)
		guids[p.GUID] = true
	}
	assert.Len(t, guids, 3, "disk and partition GUIDs are distinct")

	// util-linux reads the same table.
	out, err := exec.Command("partx", "--show", "--noheadings", "--output", "NR,START,SECTORS,NAME,TYPE", img).CombinedOutput()
	require.NoError(t, err, "partx: %s", out)
	assert.Equal(t, []string{
		"1 2048 1048576 ETCDBOX-ESP c12a7328-f81f-11d2-ba4b-00a0c93ec93b",
		"2 1050624 131072 ETCDBOX-DATA 0fc63daf-8483-4772-8e79-3d69d8477de4",
	}, normalizeLines(string(out)))

	// DATA is a placeholder of zeros: init formats it on first boot.
	data := readAt(t, img, 513<<20, 64<<20)
	assert.True(t, bytes.Equal(data, make([]byte, len(data))), "DATA holds non-zero bytes")
}

// normalizeLines splits out into lines with single spaces.
func normalizeLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return lines
}

// readAt reads n bytes of file at off.
func readAt(t *testing.T, file string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	return b
}

func TestESPPassesFsck(t *testing.T) {
	t.Parallel()
	img, _ := rawImage(t)
	esp := filepath.Join(t.TempDir(), "esp.img")
	require.NoError(t, os.WriteFile(esp, readAt(t, img, espStart, espSize), 0o644))
	out, err := exec.Command("fsck.vfat", "-n", "-v", esp).CombinedOutput()
	assert.NoError(t, err, "fsck.vfat -n:\n%s", out)
	out, err = exec.Command("blkid", "-p", "-o", "export", esp).CombinedOutput()
	require.NoError(t, err, "blkid: %s", out)
	assert.Contains(t, string(out), "LABEL=ETCDBOX-ESP")
	assert.Contains(t, string(out), "TYPE=vfat")
	assert.Contains(t, string(out), "VERSION=FAT32")
}

func TestESPFiles(t *testing.T) {
	img, _ := rawImage(t)
	cfg := testConfig(t)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return b
	}
	want := map[string][]byte{
		"/EFI/BOOT/BOOTX64.EFI":          read(cfg.Bootloader),
		"/loader/loader.conf":            []byte("default etcdbox-*\ntimeout 0\neditor no\nauto-entries no\nauto-firmware no\n"),
		"/loader/entries/etcdbox-a.conf": []byte("title etcdbox (slot a)\nversion 1\nsort-key etcdbox\nlinux /etcdbox/a/vmlinuz\ninitrd /etcdbox/a/initrd\noptions console=ttyS0,115200 panic=10 etcdbox.slot=a etcdbox.debug=1\n"),
		"/etcdbox/a/vmlinuz":             read(cfg.Kernel),
		"/etcdbox/a/initrd":              initrdBytes(t),
	}

	d, err := diskfs.Open(img, diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err)
	defer d.Close()
	fs, err := d.GetFilesystem(1)
	require.NoError(t, err)
	assert.Equal(t, filesystem.TypeFat32, fs.Type())
	assert.Equal(t, "ETCDBOX-ESP", strings.TrimSpace(fs.Label()))

	// Walk the whole ESP: exactly the wanted files, nothing else. ReadDir
	// takes io/fs paths ("." is the root).
	got := map[string][]byte{}
	var walk func(dir string)
	walk = func(dir string) {
		entries, err := fs.ReadDir(dir)
		require.NoError(t, err, "readdir %s", dir)
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			info, err := e.Info()
			require.NoError(t, err)
			// Time stamps are the epoch, not the wall clock.
			assert.Equal(t, time.Unix(testEpoch, 0).UTC().Truncate(2*time.Second), info.ModTime().UTC(), "mtime of %s", p)
			if e.IsDir() {
				walk(p)
				continue
			}
			f, err := fs.OpenFile("/"+p, os.O_RDONLY)
			require.NoError(t, err)
			got["/"+p], err = io.ReadAll(f)
			require.NoError(t, err)
		}
	}
	walk(".")
	require.ElementsMatch(t, keys(want), keys(got), "ESP files")
	for p, w := range want {
		assert.True(t, bytes.Equal(w, got[p]), "%s: %d bytes on the ESP differ from the %d input bytes", p, len(got[p]), len(w))
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRawReproducible builds the disk a second time and compares bytes.
func TestRawReproducible(t *testing.T) {
	t.Parallel()
	first, _ := rawImage(t)
	cfg := testConfig(t)
	cfg.Output = filepath.Join(t.TempDir(), "again.img")
	_, err := Build(context.Background(), cfg)
	require.NoError(t, err)
	assert.Equal(t, contentDigest(t, first), contentDigest(t, cfg.Output), "two builds of the same inputs differ")

	// A different epoch gives a different disk (time stamps, GUIDs).
	cfg.SourceDateEpoch++
	cfg.SourceDateEpoch++
	cfg.Output = filepath.Join(t.TempDir(), "later.img")
	_, err = Build(context.Background(), cfg)
	require.NoError(t, err)
	assert.NotEqual(t, contentDigest(t, first), contentDigest(t, cfg.Output), "SOURCE_DATE_EPOCH does not reach the disk")
}
