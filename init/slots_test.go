package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/supervise"
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
	// Through the reaper, as every child of this test binary: once a test
	// started it, exec's own Wait may find its child reaped already.
	out, err := supervise.CombinedOutput(t.Context(), exec.Command("mkfs.fat", "-F", "32", "-C", img, "65536"))
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
	out, err = supervise.CombinedOutput(t.Context(), exec.Command(bin, "-n", img))
	assert.NoError(t, err, "clean after the repair: %s", out)

	n = newNode()
	n.checkESP(t.Context(), filepath.Join(t.TempDir(), "no-fsck"), img)
	assert.Contains(t, strings.Join(n.ring.Lines(), "\n"), "(mounting it anyway)")
}

func TestFsckNoise(t *testing.T) {
	out := "Cannot initialize conversion from codepage 850 to ANSI_X3.4-1968: Invalid argument\n" +
		"Cannot initialize conversion from ANSI_X3.4-1968 to codepage 850: Invalid argument\n" +
		"Using internal CP850 conversion table\n" +
		"fsck.fat 4.2 (2021-01-31)\n" +
		"Dirty bit is set. Fs was not properly unmounted and some data may be corrupt.\n" +
		" Automatically removing dirty bit.\n" +
		"/dev/vda1: 12 files, 5780/130812 clusters\n"
	assert.Equal(t, "fsck.fat 4.2 (2021-01-31) | Dirty bit is set. Fs was not properly unmounted and some data may be corrupt. |  Automatically removing dirty bit. | /dev/vda1: 12 files, 5780/130812 clusters",
		oneLine(fsckNoise([]byte(out))))
}

// TestNoteReached checks that a slot on probation notes each step on the
// ESP, and that a blessed one writes nothing there.
func TestNoteReached(t *testing.T) {
	n := newNode()
	n.esp = slot.Dir(t.TempDir())
	require.NoError(t, os.MkdirAll(filepath.Join(string(n.esp), "etcdbox"), 0o755))
	n.cmdline = map[string]string{"etcdbox.slot": "b"}

	n.noteReached("prepare DATA")
	_, err := n.esp.ReadFile(slot.ReachedRecord("b"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a blessed slot notes nothing")

	n.probation = true
	n.noteReached("prepare DATA")
	n.noteReached("start etcd")
	b, err := n.esp.ReadFile(slot.ReachedRecord("b"))
	require.NoError(t, err)
	assert.Equal(t, "start etcd\n", string(b))
}
