// Package benchimage is the image configuration the bench programs build
// their images from, ours and the floor's alike: the same kernel,
// modules, etcd version and bootloader, so that two images differ only in what
// each program sets on top (/init, a seed, the command line).
package benchimage

import (
	"path/filepath"

	"github.com/etcdbox/etcdbox/image"
)

// CacheDir is where the bench's builds keep their compressed initrd
// members (image.Config.CacheDir): initrd beside sysroot, the cache the
// tests share (testenv.InitrdCache), so that a bench after a test run
// does not compress the same binaries again.
func CacheDir(sysroot string) string { return filepath.Join(filepath.Dir(sysroot), "initrd") }

// Base returns the configuration of an image with sysroot's kernel,
// modules and systemd-boot and the etcd binary etcd, labelled "bench".
func Base(sysroot, etcd string) (image.Config, error) {
	kernel, modules, err := image.FindKernel(sysroot)
	if err != nil {
		return image.Config{}, err
	}
	return image.Config{
		Kernel: kernel, Modules: modules, Etcd: etcd,
		Bootloader: image.BootloaderPath(sysroot), Version: "bench",
		CacheDir: CacheDir(sysroot),
	}, nil
}
