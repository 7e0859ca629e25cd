package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildBadInput checks that each bad input fails with an error that
// names it, before or without leaving anything at the output.
func TestBuildBadInput(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "regular-file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	otherModules := filepath.Join(t.TempDir(), "5.10.0-1-amd64")
	require.NoError(t, os.MkdirAll(otherModules, 0o755))
	etcdctlBin := testenv.Bin(t, "etcdctl") // a static Go binary that is not the init

	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   []string // substrings of the error
		is     error
	}{
		{name: "missing kernel", change: func(c *Config) { c.Kernel = "/nonexistent/vmlinuz-6.1.0-57-amd64" },
			want: []string{"kernel", "/nonexistent/vmlinuz-6.1.0-57-amd64"}},
		{name: "kernel is not a bzImage", change: func(c *Config) { c.Kernel = c.Init },
			want: []string{"kernel", "not a bzImage"}},
		{name: "modules of another kernel", change: func(c *Config) { c.Modules = otherModules },
			want: []string{"5.10.0-1-amd64", "6.1.0"}},
		{name: "missing modules", change: func(c *Config) { c.Drivers = []string{"virtio_blk", "no_such_driver", "also_missing"} },
			want: []string{"no_such_driver", "also_missing"}},
		{name: "missing etcd", change: func(c *Config) { c.Etcd = "/nonexistent/etcd" }, want: []string{"etcd", "/nonexistent/etcd"}},
		{name: "an init that does not carry etcd, and no etcd", change: func(c *Config) { c.Init = etcdctlBin },
			want: []string{"init " + etcdctlBin, "does not carry etcd", "give an etcd binary"}},
		{name: "missing init", change: func(c *Config) { c.Init = "/nonexistent/init" }, want: []string{"init", "/nonexistent/init"}},
		{name: "dynamic init", change: func(c *Config) { c.Init = "/usr/sbin/mke2fs" },
			want: []string{"init /usr/sbin/mke2fs", "dynamically linked"}},
		{name: "missing bootloader", change: func(c *Config) { c.Bootloader = "/nonexistent/BOOTX64.EFI" },
			want: []string{"bootloader", "/nonexistent/BOOTX64.EFI"}},
		{name: "missing seed", change: func(c *Config) { c.Seed = "/nonexistent/seed.yaml" }, want: []string{"seed", "/nonexistent/seed.yaml"}},
		{name: "missing e2fsprogs", change: func(c *Config) { c.ToolsRoot = t.TempDir() }, want: []string{"mke2fs"}},
		{name: "unknown format", change: func(c *Config) { c.Format = "qcow3" }, want: []string{`"qcow3"`}},
		{name: "unwritable output", change: func(c *Config) { c.Output = filepath.Join(notDir, "disk.img") },
			want: []string{"output", filepath.Join(notDir, "disk.img")}},
		{name: "size too small", change: func(c *Config) { c.Size = 100 << 20 },
			want: []string{fmt.Sprint(100 << 20), fmt.Sprint(MinSize), "578 MiB"}, is: ErrSizeTooSmall},
		{name: "push of a raw image", change: func(c *Config) { c.Push = "127.0.0.1:1/x:y" }, want: []string{"127.0.0.1:1/x:y"}},
		{name: "multi-line cmdline", change: func(c *Config) { c.Cmdline = "a\nb" }, want: []string{"cmdline"}},
		{name: "cmdline over x86's limit", change: func(c *Config) { c.Cmdline = "etcdbox.seed=" + strings.Repeat("A", MaxCmdline) },
			want: []string{"cmdline", fmt.Sprint(MaxCmdline), "seed volume"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			cfg := testConfig(t)
			cfg.Output = filepath.Join(out, "disk.img")
			tc.change(&cfg)
			res, err := Build(context.Background(), cfg)
			require.Error(t, err, "Build succeeded: %+v", res)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assertEmptyDir(t, out)
		})
	}
}

// TestBuildCanceledLeavesNothing cancels a raw build while the disk is
// being written and checks that the temporary file is gone.
func TestBuildCanceledLeavesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds an initramfs; runs without -short")
	}
	out := t.TempDir()
	cfg := testConfig(t)
	cfg.Output = filepath.Join(out, "disk.img")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sawTemp := make(chan bool, 1)
	go func() {
		// Cancel as soon as the temporary output exists: the ESP write
		// that follows takes far longer than this poll.
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(out, ".disk.img.tmp-*")); len(m) > 0 {
				sawTemp <- true
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, err := Build(ctx, cfg)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "Build error = %v, want context.Canceled", err)
	assert.True(t, <-sawTemp, "the temporary output appeared")
	assertEmptyDir(t, out)
}

// TestOCILayoutRefusesForeignDir: -o naming an unrelated directory is an
// error that leaves it alone.
func TestOCILayoutRefusesForeignDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "home")
	require.NoError(t, os.MkdirAll(out, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(out, "precious"), []byte("x"), 0o644))
	cfg := testConfig(t)
	cfg.Format, cfg.Output = FormatOCI, out
	_, err := Build(context.Background(), cfg)
	require.ErrorContains(t, err, out)
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary directory remains")
	got, err := os.ReadFile(filepath.Join(out, "precious"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
}
