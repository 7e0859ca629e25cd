package image

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// A node is one entry of a root filesystem under construction: a directory,
// a regular file (copied from src or held in data), a symlink or a
// character device. Paths are slash-separated and relative to the root,
// with no leading slash ("usr/bin/etcd").
type node struct {
	path         string
	mode         fs.FileMode // type bits and permissions
	src          string      // regular file: host file to copy
	data         []byte      // regular file: contents when src is empty
	size         int64       // regular file: length in bytes
	target       string      // symlink target
	major, minor uint32      // character device numbers
}

// open returns the contents of a regular file or the target of a symlink.
func (n *node) open() (io.ReadCloser, error) {
	switch {
	case n.mode.Type() == fs.ModeSymlink:
		return io.NopCloser(strings.NewReader(n.target)), nil
	case n.src != "":
		return os.Open(n.src)
	default:
		return io.NopCloser(bytes.NewReader(n.data)), nil
	}
}

// contentSize is the number of bytes open yields.
func (n *node) contentSize() int64 {
	switch n.mode.Type() {
	case fs.ModeSymlink:
		return int64(len(n.target))
	case 0:
		return n.size
	}
	return 0
}

// A tree is the in-memory description of a root filesystem. Both the
// initramfs (cpio) and the OCI layer (tar) are written from it, so the
// container root and the appliance root cannot drift apart. Parents are
// created on demand as 0755 directories.
type tree struct {
	nodes map[string]*node
}

func newTree() *tree { return &tree{nodes: map[string]*node{}} }

// cleanPath turns "/usr/bin/etcd" or "usr/bin/etcd" into "usr/bin/etcd".
func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// put adds n and its parent directories. Adding the same path twice is an
// error unless both entries are identical (several binaries need the
// same library) or both are directories.
func (t *tree) put(n *node) error {
	n.path = cleanPath(n.path)
	if n.path == "" {
		return fmt.Errorf("add /: the root is implicit")
	}
	if dir := path.Dir(n.path); dir != "." {
		if err := t.put(&node{path: dir, mode: fs.ModeDir | 0o755}); err != nil {
			return err
		}
	}
	old, ok := t.nodes[n.path]
	if !ok {
		t.nodes[n.path] = n
		return nil
	}
	if old.mode.IsDir() && n.mode.IsDir() {
		return nil
	}
	if old.mode == n.mode && old.src == n.src && old.target == n.target &&
		bytes.Equal(old.data, n.data) && old.major == n.major && old.minor == n.minor {
		return nil
	}
	return fmt.Errorf("add /%s: path already holds a different entry", n.path)
}

// dir adds a directory with the given permissions, replacing the default
// 0755 of an implicit parent.
func (t *tree) dir(p string, perm fs.FileMode) error {
	if err := t.put(&node{path: p, mode: fs.ModeDir | perm}); err != nil {
		return err
	}
	t.nodes[cleanPath(p)].mode = fs.ModeDir | perm
	return nil
}

// file adds the host file src (symlinks followed) at p.
func (t *tree) file(p, src string, perm fs.FileMode) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	return t.put(&node{path: p, mode: perm, src: src, size: fi.Size()})
}

// bytes adds a regular file holding data at p.
func (t *tree) bytes(p string, data []byte, perm fs.FileMode) error {
	return t.put(&node{path: p, mode: perm, data: data, size: int64(len(data))})
}

// symlink adds a symbolic link at p pointing to target.
func (t *tree) symlink(p, target string) error {
	return t.put(&node{path: p, mode: fs.ModeSymlink | 0o777, target: target})
}

// charDev adds a character device node at p.
func (t *tree) charDev(p string, major, minor uint32, perm fs.FileMode) error {
	return t.put(&node{path: p, mode: fs.ModeDevice | fs.ModeCharDevice | perm, major: major, minor: minor})
}

// sorted returns the entries ordered by path, so that a directory always
// precedes its contents and the archive bytes do not depend on the order
// entries were added in.
func (t *tree) sorted() []*node {
	out := make([]*node, 0, len(t.nodes))
	for _, n := range t.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
