package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/image/flash"
)

// buildTo builds cfg, whose -o may also be "-" (standard output: the raw
// disk, or the OCI image as a tarball) or a block device (a raw disk
// flashed in place, see package flash). Both are built into a temporary
// file first: the image is complete and checked before a byte leaves.
func buildTo(ctx context.Context, cfg image.Config, force bool, stdout, stderr io.Writer) (*image.Result, error) {
	dest := cfg.Output
	device := dest != "" && dest != "-" && flash.IsBlockDevice(dest)
	if dest != "-" && !device {
		if force {
			return nil, usageError{errors.New("--force is for -o with a block device")}
		}
		return image.Build(ctx, cfg)
	}
	if device {
		if cfg.Format != image.FormatRaw {
			return nil, fmt.Errorf("-o %s: a block device takes a raw disk image, not --format %s", dest, cfg.Format)
		}
		// Refuse a mounted, small or non-blank device before the build.
		if err := flash.Check(dest, cfg.Size, flash.Options{Force: force}); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp("", "etcdbox-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	cfg.Output = filepath.Join(tmp, "etcdbox.img")
	if cfg.Format == image.FormatOCI {
		cfg.Output += ".tar"
	}
	res, err := image.Build(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if device {
		_, err = flash.Write(ctx, cfg.Output, dest, flash.Options{Force: force, Progress: stderr})
		return res, err
	}
	f, err := os.Open(cfg.Output)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := io.Copy(stdout, f); err != nil {
		return nil, fmt.Errorf("-o -: %w", err)
	}
	return res, nil
}
