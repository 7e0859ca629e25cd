package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// pending is an output being written under a temporary name in the
// destination's directory; commit renames it into place, so a reader (or
// a crash) never sees half an image, and abort removes it.
type pending struct {
	tmp, final string
	dir        bool
	// secret outputs (a seed, an image with a baked seed: both hold a
	// private key) are committed readable by their owner only.
	secret bool
}

// checkOutput reports whether final can be created or replaced by a file
// (dir false) or an OCI image layout directory (dir true). An existing
// directory is replaced only when it is an OCI image layout (it has an
// oci-layout file) or empty, so a mistyped -o cannot delete a tree.
func checkOutput(final string, dir bool) error {
	parent := filepath.Dir(final)
	pfi, err := os.Stat(parent)
	if err == nil && !pfi.IsDir() {
		err = fmt.Errorf("%s is not a directory", parent)
	}
	if err != nil {
		return fmt.Errorf("output %s: %w", final, err)
	}
	fi, err := os.Lstat(final)
	switch {
	case err != nil:
		return nil
	case fi.Mode()&(os.ModeDevice|os.ModeNamedPipe|os.ModeSocket) != 0:
		// The rename would replace the node itself: -o /dev/sdb would
		// "succeed", write nothing to the disk and leave a regular file
		// in /dev.
		return fmt.Errorf("output %s: is a %s, not a regular file; refusing to replace it", final, fileKind(fi.Mode()))
	case !dir && fi.IsDir():
		return fmt.Errorf("output %s: is a directory", final)
	case dir && !fi.IsDir():
		return fmt.Errorf("output %s: exists and is not a directory", final)
	case dir:
		entries, _ := os.ReadDir(final)
		if _, err := os.Stat(filepath.Join(final, "oci-layout")); err != nil && len(entries) > 0 {
			return fmt.Errorf("output %s: exists and is not an OCI image layout; refusing to replace it", final)
		}
	}
	return nil
}

// fileKind names the kind of a file that is neither regular nor a
// directory.
func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "block device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// pendingFile creates a temporary file next to final.
func pendingFile(final string) (*os.File, *pending, error) {
	if err := checkOutput(final, false); err != nil {
		return nil, nil, err
	}
	f, err := os.CreateTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return nil, nil, fmt.Errorf("output %s: %w", final, err)
	}
	return f, &pending{tmp: f.Name(), final: final}, nil
}

// pendingDir creates a temporary directory next to final, which
// checkOutput must accept as a directory output.
func pendingDir(final string) (*pending, error) {
	if err := checkOutput(final, true); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(final), "."+filepath.Base(final)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", final, err)
	}
	return &pending{tmp: tmp, final: final, dir: true}, nil
}

// commit moves the finished output into place, readable by all unless
// it is secret: CreateTemp and MkdirTemp made it private.
func (p *pending) commit() error {
	mode := os.FileMode(0o644)
	if p.dir {
		mode = 0o755
	}
	if p.secret {
		mode &= 0o700
	}
	if err := os.Chmod(p.tmp, mode); err != nil {
		return fmt.Errorf("output %s: %w", p.final, err)
	}
	if p.dir {
		// rename(2) cannot replace a non-empty directory: move the old
		// one aside first and delete it once the new one is in place.
		old := p.tmp + ".old"
		if err := os.Rename(p.final, old); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("output %s: %w", p.final, err)
		}
		if err := os.Rename(p.tmp, p.final); err != nil {
			_ = os.Rename(old, p.final)
			return fmt.Errorf("output %s: %w", p.final, err)
		}
		return os.RemoveAll(old)
	}
	if err := os.Rename(p.tmp, p.final); err != nil {
		return fmt.Errorf("output %s: %w", p.final, err)
	}
	return nil
}

// abort removes the temporary output; it is a no-op after commit.
func (p *pending) abort() {
	_ = os.RemoveAll(p.tmp)
}
