package slot

import (
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
	fsys := Dir(t.TempDir())
	populate(t, fsys, builderESP())
	bad := State{Slots: map[string]Slot{"b": {Name: "b", Entry: &Entry{File: "etcdbox-b+0-1.conf", Name: Name{Slot: "b", Counted: true, Left: 0, Done: 1}}}}}
	require.Equal(t, Bad, bad.Slots["b"].Status())
	assert.Empty(t, LastRollback(fsys, State{Slots: map[string]Slot{}}, "a"), "b is not bad")
	assert.Contains(t, LastRollback(fsys, bad, "a"), "never mounted the ESP")
	require.NoError(t, WriteRecord(fsys, ReachedRecord("b"), "prepare DATA"))
	assert.Equal(t, `slot b: bad, no reason recorded (kernel panic, hang or crash loop); its last boot reached "prepare DATA"`, LastRollback(fsys, bad, "a"))
	require.NoError(t, WriteRecord(fsys, FailedRecord("b"), "gate failed: x"))
	assert.Equal(t, "slot b: gate failed: x", LastRollback(fsys, bad, "a"))
}
