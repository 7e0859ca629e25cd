package slot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecords: records round-trip, a missing one reads empty, a malformed
// image record reads as none, and ClearRecords leaves the command-line
// record, which the next upgrade needs.
func TestRecords(t *testing.T) {
	fsys := Dir(t.TempDir())
	populate(t, fsys, builderESP())

	got, err := ReadRecord(fsys, FailedRecord("b"))
	require.NoError(t, err)
	assert.Empty(t, got, "no record")
	require.NoError(t, WriteRecord(fsys, FailedRecord("b"), "gate failed: etcd does not answer"))
	got, err = ReadRecord(fsys, FailedRecord("b"))
	require.NoError(t, err)
	assert.Equal(t, "gate failed: etcd does not answer", got)

	img := Image{Digest: "sha256:" + strings.Repeat("1", 64), Kernel: strings.Repeat("2", 64), Initrd: strings.Repeat("3", 64)}
	require.NoError(t, WriteImage(fsys, "b", img))
	back, err := ReadImage(fsys, "b")
	require.NoError(t, err)
	assert.Equal(t, img, back)
	require.NoError(t, fsys.WriteFile(ImageRecord("a"), strings.NewReader("image x\nvmlinuz short\n")))
	back, err = ReadImage(fsys, "a")
	require.NoError(t, err)
	assert.Equal(t, Image{}, back, "a malformed record is no image")

	require.NoError(t, WriteRecord(fsys, ReachedRecord("b"), "start etcd"))
	require.NoError(t, WriteRecord(fsys, CmdlineRecord("b"), "quiet"))
	require.NoError(t, ClearRecords(fsys, "b"))
	for _, p := range []string{FailedRecord("b"), ReachedRecord("b"), ImageRecord("b")} {
		got, err := ReadRecord(fsys, p)
		require.NoError(t, err)
		assert.Empty(t, got, "%s survived", p)
	}
	got, err = ReadRecord(fsys, CmdlineRecord("b"))
	require.NoError(t, err)
	assert.Equal(t, "quiet", got, "the command-line record stays")
	require.NoError(t, ClearRecords(fsys, "b"), "nothing to clear is no error")
	assert.Equal(t, "etcdbox/b/vmlinuz", KernelFile("b"))
	assert.Equal(t, "etcdbox/b.failed", FailedRecord("b"))
}

// TestLastRollback: the reason of a bad slot, else how far it got.
func TestLastRollback(t *testing.T) {
	esp := Dir(t.TempDir())
	require.NoError(t, os.MkdirAll(filepath.Join(string(esp), "etcdbox"), 0o755))
	bad := State{Slots: map[string]Slot{
		"a": {Entry: &Entry{Name: Name{}}},
		"b": {Entry: &Entry{Name: Name{Counted: true, Left: 0, Done: 3}}},
	}}
	require.Equal(t, Bad, bad.Slots["b"].Status(), "test setup: slot b is bad")
	assert.Equal(t, "slot b: bad, no reason recorded (kernel panic, hang or crash loop); its last boot never mounted the ESP (the kernel, a missing disk driver, or the init before that step)", LastRollback(esp, bad, "a"))
	require.NoError(t, esp.WriteFile(ReachedRecord("b"), strings.NewReader("start etcd\n")))
	assert.Equal(t, `slot b: bad, no reason recorded (kernel panic, hang or crash loop); its last boot reached "start etcd"`, LastRollback(esp, bad, "a"))
	require.NoError(t, esp.WriteFile(FailedRecord("b"), strings.NewReader("gate failed: not a voting member after 120s\n")))
	assert.Equal(t, "slot b: gate failed: not a voting member after 120s", LastRollback(esp, bad, "a"))
	assert.Empty(t, LastRollback(esp, bad, "b"), "the booted slot is not a rollback")
	assert.Empty(t, LastRollback(esp, bad, ""), "no slots in container mode")
}
