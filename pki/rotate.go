package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The layout of a CA rotation in a pki directory (etcdbox pki rotate-ca):
// the next CA in NextDir, made by InitNamed; the bundle of both roots in
// BundleFile, for clients to trust before the rotation's reissue phase;
// after the rotation (PromoteNext) the old CA in PreviousDir.
const (
	NextDir     = "next"
	PreviousDir = "previous"
	BundleFile  = "ca-bundle.crt"
)

// PromoteNext makes the next CA in dir/next the CA of dir once a rotation
// is done: dir's ca.crt, ca.key, admin.crt and admin.key move to
// dir/previous/ (mode 0700), whatever dir/next holds moves to dir, and
// dir/next goes. ca-bundle.crt stays. Run again after an interruption,
// it finishes the job.
func PromoteNext(dir string) error {
	next, prev := filepath.Join(dir, NextDir), filepath.Join(dir, PreviousDir)
	for _, f := range InitFiles {
		if exists(filepath.Join(next, f)) || (exists(filepath.Join(dir, f)) && exists(filepath.Join(prev, f))) {
			continue
		}
		return fmt.Errorf("promote the next CA: %s: %w", filepath.Join(next, f), fs.ErrNotExist)
	}
	if err := os.MkdirAll(prev, 0o700); err != nil {
		return fmt.Errorf("promote the next CA: %w", err)
	}
	for _, f := range InitFiles {
		if !exists(filepath.Join(next, f)) {
			continue // moved already
		}
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(prev, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("promote the next CA: %w", err)
		}
		if err := os.Rename(filepath.Join(next, f), filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("promote the next CA: %w", err)
		}
	}
	rest, err := os.ReadDir(next)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("promote the next CA: %w", err)
	}
	for _, e := range rest {
		if err := os.Rename(filepath.Join(next, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("promote the next CA: %w", err)
		}
	}
	if err := os.Remove(next); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("promote the next CA: %w", err)
	}
	for _, d := range []string{prev, dir} {
		if err := syncDir(d); err != nil {
			return fmt.Errorf("promote the next CA: %w", err)
		}
	}
	return nil
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
