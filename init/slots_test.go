package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckESP runs the host's fsck.fat, as the init runs its own, on a
// FAT32 volume left dirty as by a power cut: the init logs the repair and
// the volume is clean after it; a checker that cannot run is logged too.
func TestCheckESP(t *testing.T) {
	bin, err := exec.LookPath("fsck.fat")
	if err != nil {
		bin = "/usr/sbin/fsck.fat"
	}
	require.FileExists(t, bin, "dosfstools (hack/deps.sh installs it)")
	img := filepath.Join(t.TempDir(), "esp.img")
	out, err := exec.Command("mkfs.fat", "-F", "32", "-C", img, "65536").CombinedOutput()
	require.NoError(t, err, "mkfs.fat: %s", out)

	n := newNode()
	n.checkESP(t.Context(), bin, img)
	assert.Empty(t, n.ring.Lines(), "a clean volume logs nothing")

	f, err := os.OpenFile(img, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{1}, 0x41) // FAT32 boot sector: the dirty bit
	require.NoError(t, err)
	require.NoError(t, f.Close())

	n.checkESP(t.Context(), bin, img)
	logs := strings.Join(n.ring.Lines(), "\n")
	assert.Contains(t, logs, "fsck.fat repaired it")
	assert.Contains(t, logs, "Dirty bit")
	out, err = exec.Command(bin, "-n", img).CombinedOutput()
	assert.NoError(t, err, "clean after the repair: %s", out)

	n = newNode()
	n.checkESP(t.Context(), filepath.Join(t.TempDir(), "no-fsck"), img)
	assert.Contains(t, strings.Join(n.ring.Lines(), "\n"), "(mounting it anyway)")
}
