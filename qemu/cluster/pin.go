package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdbox/etcdbox/qemu"
)

// BaseImage is the cluster's own reference to the image its nodes boot
// (see pinImage).
const BaseImage = "base.img"

// pinImage returns an image path inside dir with src's content: src
// itself when it is in dir, else dir/base.img, a hard link to src (or a
// sparse copy across file systems). Every node's disk is a qcow2 overlay
// whose backing file must never change; a rebuild of src (make image
// replaces out/etcdbox.img) would otherwise change the backing file of a
// cluster that is down, under its disks. A rebuild writes a new file and
// renames it, so the link keeps the old content.
func pinImage(src, dir string) (string, error) {
	if filepath.Dir(src) == dir {
		return src, nil
	}
	dst := filepath.Join(dir, BaseImage)
	si, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	if di, err := os.Stat(dst); err == nil && os.SameFile(si, di) {
		return dst, nil
	}
	tmp := dst + ".tmp"
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := qemu.CopySparse(tmp, src); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("copy image %s to %s: %w", src, dst, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// pinNodeImage pins img for one node: in its directory, which it
// creates.
func pinNodeImage(img, dir string) (string, error) {
	abs, err := filepath.Abs(img)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return pinImage(abs, dir)
}
