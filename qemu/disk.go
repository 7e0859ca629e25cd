package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// prepareDisk makes the VM's disk in c.Dir unless one is there, and grows
// it to c.DiskSize. An existing disk is kept: it is the machine's state.
func prepareDisk(ctx context.Context, c Config) (disk, error) {
	for _, d := range []disk{{"disk.qcow2", "qcow2"}, {"disk.raw", "raw"}} {
		if _, err := os.Stat(filepath.Join(c.Dir, d.file)); err == nil {
			return d, growDisk(ctx, c.Dir, d, c.DiskSize)
		}
	}
	format, err := imageFormat(c.Image)
	if err != nil {
		return disk{}, err
	}
	var d disk
	switch {
	case c.Overlay:
		d = disk{"disk.qcow2", "qcow2"}
		tmp := d.file + ".tmp"
		if _, err := qemuImg(ctx, c.Dir, "create", "-q", "-f", "qcow2", "-F", format, "-b", c.Image, tmp); err != nil {
			return disk{}, fmt.Errorf("create overlay of %s: %w", c.Image, err)
		}
		if err := os.Rename(filepath.Join(c.Dir, tmp), filepath.Join(c.Dir, d.file)); err != nil {
			return disk{}, err
		}
	case format == "vmdk":
		// A stream-optimized VMDK is written front to back only; the
		// VM's disk is a qcow2 of its content.
		d = disk{"disk.qcow2", "qcow2"}
		tmp := d.file + ".tmp"
		if _, err := qemuImg(ctx, c.Dir, "convert", "-q", "-f", "vmdk", "-O", "qcow2", c.Image, tmp); err != nil {
			return disk{}, fmt.Errorf("convert %s: %w", c.Image, err)
		}
		if err := os.Rename(filepath.Join(c.Dir, tmp), filepath.Join(c.Dir, d.file)); err != nil {
			return disk{}, err
		}
	default:
		d = disk{"disk." + format, format}
		if err := CopySparse(filepath.Join(c.Dir, d.file), c.Image); err != nil {
			return disk{}, err
		}
	}
	return d, growDisk(ctx, c.Dir, d, c.DiskSize)
}

// RemoveDisk deletes the disk of the VM in dir, so that its next Start
// makes a fresh one from Config.Image: a replaced, empty disk. The
// machine's UEFI variables stay. It refuses while QEMU runs in dir, and
// reports whether there was a disk.
func RemoveDisk(dir string) (bool, error) {
	if vm, err := Attach(dir); err == nil {
		return false, fmt.Errorf("remove the disk in %s: %w (pid %d)", dir, ErrRunning, vm.PID())
	}
	removed := false
	for _, f := range []string{"disk.qcow2", "disk.raw"} {
		err := os.Remove(filepath.Join(dir, f))
		switch {
		case err == nil:
			removed = true
		case !errors.Is(err, fs.ErrNotExist):
			return removed, fmt.Errorf("remove the disk in %s: %w", dir, err)
		}
	}
	return removed, nil
}

// imageFormat tells qcow2 and VMDK (by their magic) from raw.
func imageFormat(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open image: %w", err)
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read image %s: %w", path, err)
	}
	if bytes.Equal(magic, []byte("QFI\xfb")) {
		return "qcow2", nil
	}
	if bytes.Equal(magic, []byte("KDMV")) {
		return "vmdk", nil
	}
	return "raw", nil
}

// growDisk grows d to size bytes when it is smaller, and refuses to shrink.
func growDisk(ctx context.Context, dir string, d disk, size int64) error {
	if size == 0 {
		return nil
	}
	path := filepath.Join(dir, d.file)
	cur, err := virtualSize(ctx, dir, d)
	if err != nil {
		return err
	}
	switch {
	case size == cur:
		return nil
	case size < cur:
		return fmt.Errorf("grow disk %s to %d bytes: it already has %d, and disks never shrink", path, size, cur)
	case d.format == "raw":
		if err := os.Truncate(path, size); err != nil {
			return fmt.Errorf("grow disk %s: %w", path, err)
		}
		return nil
	default:
		if _, err := qemuImg(ctx, dir, "resize", "-q", "-f", d.format, d.file, strconv.FormatInt(size, 10)); err != nil {
			return fmt.Errorf("grow disk %s: %w", path, err)
		}
		return nil
	}
}

// virtualSize returns the size of the disk the guest sees. It reads
// with -U (no lock), so it also works while the VM runs.
func virtualSize(ctx context.Context, dir string, d disk) (int64, error) {
	if d.format == "raw" {
		fi, err := os.Stat(filepath.Join(dir, d.file))
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	out, err := qemuImg(ctx, dir, "info", "-U", "--output=json", "-f", d.format, d.file)
	if err != nil {
		return 0, fmt.Errorf("inspect disk %s: %w", filepath.Join(dir, d.file), err)
	}
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return 0, fmt.Errorf("inspect disk %s: %w", filepath.Join(dir, d.file), err)
	}
	return info.VirtualSize, nil
}

// qemuImg runs qemu-img in dir and returns its stdout; the error carries
// its stderr.
func qemuImg(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, imgBinary, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %v: %w: %s", imgBinary, args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// CopySparse copies src to dst (through a temporary file) leaving holes
// where src has zero blocks: an image is mostly zeros.
func CopySparse(dst, src string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open image: %w", err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create disk: %w", err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
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
				return fmt.Errorf("copy %s to %s: %w", src, tmp, err)
			}
			size += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read image %s: %w", src, rerr)
		}
	}
	// Truncate sets the length when the image ends in a hole.
	if err := out.Truncate(size); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, tmp, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, tmp, err)
	}
	return os.Rename(tmp, dst)
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// copyOnce copies src to dst unless dst exists.
func copyOnce(dst, src string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(dst+".tmp", dst)
}
