// Package benchimage is the image configuration the bench programs build
// their images from, ours and the floor's alike: the same kernel,
// modules, etcd version and bootloader, so that two images differ only in what
// each program sets on top (/init, a seed, the command line).
package benchimage

import "github.com/etcdbox/etcdbox/image"

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
	}, nil
}
