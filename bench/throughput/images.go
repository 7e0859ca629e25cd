package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/etcdbox/etcdbox/bench/internal/benchimage"
	"github.com/etcdbox/etcdbox/image"
)

// floorNames are the floor cluster's members, with their addresses on
// its network (the appliance cluster's nodes have the same ones).
var floorNames = []string{"f1", "f2", "f3"}

// floorIP is the address of floor member i (0-based) on its network,
// 10.88.0.11 and up, as qemu/cluster numbers its nodes.
func floorIP(i int) string { return fmt.Sprintf("10.88.0.%d", 11+i) }

// floorCmdline is the floor image's kernel command line: the cluster
// mode of bench/floorinit, each VM finding its member by its MAC.
func floorCmdline() string {
	var parts []string
	for i, n := range floorNames {
		parts = append(parts, n+"="+floorIP(i))
	}
	return "floor.cluster=" + strings.Join(parts, ",")
}

// images are the raw images a run boots; floorTLS is "" without the TLS
// floor.
type images struct{ ours, floor, floorTLS string }

// buildImages builds our image (no seed: the cluster harness gives each
// node its seed volume), the floor image and, with a CA seed, the TLS
// floor's, from the same kernel, modules, etcd version and bootloader, so
// they differ in /init and the floors' command lines only: ours runs the
// init's own etcd (etcdbox build's default), the floors o.etcd, both
// built from the module go.mod pins.
func (o options) buildImages(ctx context.Context, dir string, tlsSeed []byte) (images, error) {
	im := images{ours: filepath.Join(dir, "ours.img"), floor: filepath.Join(dir, "floor.img")}
	base, err := benchimage.Base(o.sysroot, o.etcd)
	if err != nil {
		return im, err
	}
	ours := base
	ours.Etcd, ours.Init, ours.Output = "", o.init, im.ours
	floor := base
	floor.Init, floor.Output, floor.Cmdline = o.floorInit, im.floor, floorCmdline()
	cfgs := []image.Config{ours, floor}
	if tlsSeed != nil {
		im.floorTLS = filepath.Join(dir, "floor-tls.img")
		ft := floor
		ft.Output, ft.Cmdline = im.floorTLS, floorCmdline()+" floor.tls="+hex.EncodeToString(tlsSeed)
		cfgs = append(cfgs, ft)
	}
	for _, c := range cfgs {
		if _, err := image.Build(ctx, c); err != nil {
			return im, fmt.Errorf("build %s: %w", c.Output, err)
		}
	}
	return im, nil
}
