package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
		if err := copySparse(tmp, src); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("copy image %s to %s: %w", src, dst, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// copySparse copies src to dst, leaving holes for zero blocks: an image
// is mostly zeros.
func copySparse(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	var size int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if isZero(buf[:n]) {
				_, err = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, err = out.Write(buf[:n])
			}
			if err != nil {
				out.Close()
				return err
			}
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
