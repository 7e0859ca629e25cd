package kmod

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzIndex writes fuzz input as modules.dep, modules.alias,
// modules.builtin and modules.softdep and reads the index: it either
// parses or fails with an error naming the file, never a panic, and
// resolving a name against whatever parsed never panics either.
func FuzzIndex(f *testing.F) {
	f.Add("kernel/drivers/block/virtio_blk.ko.xz: kernel/drivers/virtio/virtio.ko.xz\nkernel/drivers/virtio/virtio.ko.xz:\n",
		"alias virtio:d00000002v* virtio_blk\n", "kernel/fs/ext4/ext4.ko\n", "softdep virtio_blk pre: virtio post: crc32c\n")
	f.Add("a.ko: b.ko b.ko\nb.ko: a.ko\n", "alias * a\n", "", "softdep\n")
	f.Fuzz(func(t *testing.T, dep, alias, builtin, soft string) {
		dir := t.TempDir()
		for name, data := range map[string]string{"modules.dep": dep, "modules.alias": alias, "modules.builtin": builtin, "modules.softdep": soft} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ix, err := ReadIndex(dir)
		if err != nil {
			return
		}
		for _, name := range []string{"virtio_blk", "a", "b", "virtio:d00000002v00001AF4", "pci:v00008086d*"} {
			_ = ix.Match(name)
			_ = ix.Resolve(name)
			_, _ = ix.Order(name) // a dependency loop is an error, not a hang
		}
	})
}
