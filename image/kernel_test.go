package image

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

func TestKernelVersion(t *testing.T) {
	vmlinuz, modules := testenv.Kernel(t)
	got, err := kernelVersion(vmlinuz)
	require.NoError(t, err)
	assert.Equal(t, filepath.Base(modules), got)

	_, err = kernelVersion(testenv.Bin(t, "etcd"))
	assert.ErrorContains(t, err, "not a bzImage")
}

func TestVersionLess(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-10-amd64", true},
		{"vmlinuz-6.1.0-10-amd64", "vmlinuz-6.1.0-9-amd64", false},
		{"vmlinuz-5.10.0-1-amd64", "vmlinuz-6.1.0-1-amd64", true},
		{"vmlinuz-6.1.0-1-amd64", "vmlinuz-6.1.0-1-amd64", false},
		{"vmlinuz-6.1", "vmlinuz-6.1.0", true},
	} {
		assert.Equal(t, tc.want, versionLess(tc.a, tc.b), "versionLess(%s, %s)", tc.a, tc.b)
	}
}

func TestFindKernel(t *testing.T) {
	root := t.TempDir()
	for _, kver := range []string{"6.1.0-9-amd64", "6.1.0-10-amd64", "6.1.0-11-amd64"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, "boot"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "boot", "vmlinuz-"+kver), nil, 0o644))
		if kver == "6.1.0-11-amd64" {
			continue // no modules: not a candidate
		}
		mods := filepath.Join(root, "lib/modules", kver)
		require.NoError(t, os.MkdirAll(mods, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(mods, "modules.dep"), nil, 0o644))
	}
	k, m, err := FindKernel(root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "boot/vmlinuz-6.1.0-10-amd64"), k)
	assert.Equal(t, filepath.Join(root, "lib/modules/6.1.0-10-amd64"), m)

	_, _, err = FindKernel(t.TempDir())
	assert.Error(t, err)
}
