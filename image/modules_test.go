package image

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// fakeModules writes a small modules directory.
func fakeModules(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "6.1.0-test")
	files := map[string]string{
		"modules.dep": "kernel/a/virtio.ko:\n" +
			"kernel/a/virtio_blk.ko: kernel/a/virtio.ko\n" +
			"kernel/a/virtio_net.ko: kernel/a/net_failover.ko kernel/a/failover.ko kernel/a/virtio.ko\n" +
			"kernel/a/net_failover.ko: kernel/a/failover.ko\n" +
			"kernel/a/failover.ko:\n" +
			"kernel/fs/ext4.ko: kernel/lib/crc16.ko\n" +
			"kernel/lib/crc16.ko:\n" +
			"kernel/crypto/crc32c_generic.ko:\n" +
			"kernel/fs/nls_iso8859-1.ko:\n" +
			"kernel/x/unrelated.ko: kernel/a/virtio.ko\n",
		"modules.builtin": "kernel/drivers/input/evdev.ko\n",
		"modules.alias": "# Aliases extracted from modules themselves.\n" +
			"alias virtio:d00000002v* virtio_blk\n" +
			"alias crypto-crc32c crc32c_generic\n" +
			"alias pci:v00001AF4d* unrelated\n",
		"modules.softdep": "# Soft dependencies\nsoftdep ext4 pre: crypto-crc32c\nsoftdep unrelated pre: crc16\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return dir
}

func TestResolveModules(t *testing.T) {
	ix, err := loadModules(fakeModules(t))
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		drivers []string
		want    []string
		wantErr []string
	}{
		{name: "deps", drivers: []string{"virtio_net"},
			want: []string{"kernel/a/failover.ko", "kernel/a/net_failover.ko", "kernel/a/virtio.ko", "kernel/a/virtio_net.ko"}},
		{name: "softdep by alias", drivers: []string{"ext4"},
			want: []string{"kernel/crypto/crc32c_generic.ko", "kernel/fs/ext4.ko", "kernel/lib/crc16.ko"}},
		{name: "dash and underscore", drivers: []string{"nls_iso8859_1"}, want: []string{"kernel/fs/nls_iso8859-1.ko"}},
		{name: "builtin needs no file", drivers: []string{"evdev", "virtio_blk"},
			want: []string{"kernel/a/virtio.ko", "kernel/a/virtio_blk.ko"}},
		{name: "missing names all reported", drivers: []string{"virtio_blk", "nosuch", "gone_too"},
			wantErr: []string{"nosuch", "gone_too"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ix.resolve(tc.drivers)
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, w := range tc.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				assert.NotContains(t, err.Error(), "virtio_blk")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got, "resolve(%v)", tc.drivers)
		})
	}
}

func TestModuleMetadataFiltered(t *testing.T) {
	ix, err := loadModules(fakeModules(t))
	require.NoError(t, err)
	mods, err := ix.resolve([]string{"virtio_blk", "ext4"})
	require.NoError(t, err)
	md := ix.metadata(mods)
	assert.Equal(t, "kernel/a/virtio.ko:\nkernel/a/virtio_blk.ko: kernel/a/virtio.ko\n"+
		"kernel/fs/ext4.ko: kernel/lib/crc16.ko\nkernel/lib/crc16.ko:\nkernel/crypto/crc32c_generic.ko:\n", string(md["modules.dep"]))
	assert.Equal(t, "alias virtio:d00000002v* virtio_blk\nalias crypto-crc32c crc32c_generic\n", string(md["modules.alias"]))
	assert.Equal(t, "softdep ext4 pre: crypto-crc32c\n", string(md["modules.softdep"]))
	assert.Equal(t, "kernel/drivers/input/evdev.ko\n", string(md["modules.builtin"]))
}

// TestDefaultDriversResolve checks the default set against the real
// kernel: everything is found, and every dependency modules.dep names
// for a selected module is selected too.
func TestDefaultDriversResolve(t *testing.T) {
	_, modules := testenv.Kernel(t)
	ix, err := loadModules(modules)
	require.NoError(t, err)
	mods, err := ix.resolve(DefaultDrivers)
	require.NoError(t, err)
	have := map[string]bool{}
	for _, m := range mods {
		have[m] = true
		_, err := os.Stat(filepath.Join(modules, m))
		assert.NoError(t, err, "module file %s", m)
	}
	for _, m := range mods {
		for _, d := range ix.deps[m] {
			assert.True(t, have[d], "%s needs %s", m, d)
		}
	}
	for _, d := range DefaultDrivers {
		assert.True(t, have[ix.byName[d]] || ix.builtin[d], "driver %s is neither selected nor built in", d)
	}
	// The filtered modules.dep names exactly the selected modules.
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(ix.metadata(mods)["modules.dep"]))
	for sc.Scan() {
		mod, _, _ := strings.Cut(sc.Text(), ":")
		lines = append(lines, mod)
	}
	assert.ElementsMatch(t, mods, lines)
}
