package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/etcdbox/etcdbox/bench/internal/benchimage"
	"github.com/etcdbox/etcdbox/image"
)

// Image versions, as the node API reports them.
const (
	v1Version = "bench-v1"
	v2Version = "bench-v2"
)

// badImage is an image that cannot boot, and how its failure shows.
type badImage struct {
	name string // -bad name
	what string // for people
	path string // OCI tarball
	// failure are the console lines that end its boot.
	failure []string
	// cmdline must be on its slot's kernel command line.
	cmdline string
	drivers []string // nil: the default set
}

// badNames are the bad images -bad can name.
var badNames = []string{"panic", "nomod"}

// badImages returns the bad images named in names, to be built in dir.
func badImages(dir string, names []string) []badImage {
	all := map[string]badImage{
		// The kernel finds no /init and panics; panic=10 reboots.
		"panic": {what: "panicking kernel command line", failure: []string{"Kernel panic"}, cmdline: "rdinit=/nonexistent"},
		// The init finds neither the ESP nor DATA, waits for them, and
		// reboots.
		"nomod": {
			what: "initramfs without virtio_blk", failure: []string{"etcdbox: fatal: "},
			drivers: slices.DeleteFunc(slices.Clone(image.DefaultDrivers), func(d string) bool { return d == "virtio_blk" }),
		},
	}
	var out []badImage
	for _, n := range names {
		b := all[n]
		b.name, b.path = n, filepath.Join(dir, "bad-"+n+".tar")
		out = append(out, b)
	}
	return out
}

// images are what a run boots and rolls.
type images struct {
	v1  string // raw disk image the cluster boots
	v2  string // OCI tarball of the upgrade
	bad []badImage
}

// buildImages builds the raw v1 image, the v2 upgrade and the bad images
// into dir, from the same kernel, modules, etcd and init.
func (o options) buildImages(ctx context.Context, dir string) (images, error) {
	im := images{v1: filepath.Join(dir, "v1.img"), v2: filepath.Join(dir, "v2.tar"), bad: badImages(dir, o.bad)}
	kernel, modules, err := image.FindKernel(o.sysroot)
	if err != nil {
		return im, err
	}
	base := image.Config{Kernel: kernel, Modules: modules, Etcd: o.etcd, Init: o.init, CacheDir: benchimage.CacheDir(o.sysroot)}
	v1 := base
	v1.Output, v1.Version, v1.Bootloader = im.v1, v1Version, image.BootloaderPath(o.sysroot)
	v2 := base
	v2.Output, v2.Version, v2.Format = im.v2, v2Version, image.FormatOCI
	cfgs := []image.Config{v1, v2}
	for _, b := range im.bad {
		c := base
		c.Output, c.Version, c.Format = b.path, "bench-bad-"+b.name, image.FormatOCI
		c.Cmdline, c.Drivers = b.cmdline, b.drivers
		cfgs = append(cfgs, c)
	}
	for _, c := range cfgs {
		if _, err := image.Build(ctx, c); err != nil {
			return im, fmt.Errorf("build %s: %w", c.Output, err)
		}
	}
	return im, nil
}
