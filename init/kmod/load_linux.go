package kmod

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// InsertModule inserts the module file at path with finit_module(2).
// Compressed modules (.ko.xz, .ko.zst, .ko.gz) are handed to the kernel
// to decompress (MODULE_INIT_COMPRESSED_FILE, Linux 5.17+ with
// CONFIG_MODULE_DECOMPRESS). A module that is already loaded is not an
// error.
func InsertModule(path, params string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	flags := 0
	if ext := filepath.Ext(path); ext == ".xz" || ext == ".zst" || ext == ".gz" {
		flags |= unix.MODULE_INIT_COMPRESSED_FILE
	}
	err = unix.FinitModule(int(f.Fd()), params, flags)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finit_module %s: %w", path, err)
	}
	return nil
}

// DefaultDir returns /lib/modules/<release> for the running kernel.
func DefaultDir() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	release := strings.TrimRight(string(u.Release[:]), "\x00")
	return filepath.Join("/lib/modules", release), nil
}
