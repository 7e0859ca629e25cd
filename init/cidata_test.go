package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdbox/etcdbox/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVolumeLabel(t *testing.T) {
	dir := t.TempDir()
	fat := filepath.Join(dir, "seed.img")
	require.NoError(t, image.WriteCidata(fat, []byte("cluster: c\n"), []byte("instance-id: x\n"), 0))
	f, err := os.Open(fat)
	require.NoError(t, err)
	defer f.Close()
	label, fs := volumeLabel(f)
	assert.Equal(t, "vfat", fs)
	assert.Equal(t, "cidata", label)

	iso := make([]byte, 17*2048)
	pvd := iso[16*2048:]
	pvd[0] = 1
	copy(pvd[1:6], "CD001")
	copy(pvd[40:72], bytes.Repeat([]byte(" "), 32))
	copy(pvd[40:], "cidata")
	label, fs = volumeLabel(bytes.NewReader(iso))
	assert.Equal(t, "iso9660", fs)
	assert.Equal(t, "cidata", label)

	label, fs = volumeLabel(bytes.NewReader(make([]byte, 64<<10)))
	assert.Empty(t, fs, "zeros are no filesystem")
	assert.Empty(t, label)
}

func TestFindCidata(t *testing.T) {
	sys, dev := t.TempDir(), t.TempDir()
	for _, name := range []string{"vda", "vda1", "vdb"} {
		require.NoError(t, os.Mkdir(filepath.Join(sys, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dev, name), make([]byte, 4096), 0o644))
	}
	_, _, err := findCidata(sys, dev)
	require.ErrorIs(t, err, errNoCidata)

	require.NoError(t, image.WriteCidata(filepath.Join(dev, "vdb"), []byte("cluster: c\n"), nil, 0))
	got, fs, err := findCidata(sys, dev)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dev, "vdb"), got)
	assert.Equal(t, "vfat", fs)
}
