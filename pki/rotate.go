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

// PromoteNext makes the next CA of dir its CA once a rotation is done:
// ca.crt, ca.key, admin.crt and admin.key move to dir/previous (replacing
// what a former rotation left there), dir/next's move up, and dir/next
// goes. Every file is moved by rename, in the same filesystem.
func PromoteNext(dir string) error {
	next, prev := filepath.Join(dir, NextDir), filepath.Join(dir, PreviousDir)
	for _, name := range InitFiles {
		if _, err := os.Stat(filepath.Join(next, name)); err != nil {
			return fmt.Errorf("promote %s: %w", next, err)
		}
	}
	if err := os.RemoveAll(prev); err != nil {
		return fmt.Errorf("promote %s: %w", next, err)
	}
	if err := os.Mkdir(prev, 0o700); err != nil {
		return fmt.Errorf("promote %s: %w", next, err)
	}
	for _, name := range InitFiles {
		err := os.Rename(filepath.Join(dir, name), filepath.Join(prev, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("promote %s: %w", next, err)
		}
	}
	for _, name := range InitFiles {
		if err := os.Rename(filepath.Join(next, name), filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("promote %s: %w", next, err)
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return os.RemoveAll(next)
}
