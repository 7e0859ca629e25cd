package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdbox/etcdbox/bench/internal/benchimage"
	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

// images are the two raw images a run boots, and the PKI directory whose
// admin certificate reads from ours.
type images struct {
	ours, floor string
	// nometa is ours with the cloud metadata probe off
	// (etcdbox.metadata=off): ours against it is what the probe costs a
	// node outside any cloud (QEMU's user network answers nothing at
	// 169.254.169.254).
	nometa string
	pkiDir string
}

// buildImages writes a cluster CA and a seed carrying it, then builds our
// image with the seed baked in and the floor image without one. Both use
// the same kernel, modules, etcd version and bootloader, so they differ
// only in /init (and the seed file): ours runs the init's own etcd
// (etcdbox build's default), the floor o.etcd, both built from the
// module go.mod pins.
func (o options) buildImages(ctx context.Context, dir string) (images, error) {
	im := images{
		ours:   filepath.Join(dir, "ours.img"),
		floor:  filepath.Join(dir, "floor.img"),
		nometa: filepath.Join(dir, "nometa.img"),
		pkiDir: filepath.Join(dir, "pki"),
	}
	if err := pki.Init(im.pkiDir, false); err != nil {
		return im, err
	}
	seed, err := writeSeed(im.pkiDir, filepath.Join(dir, "seed.yaml"))
	if err != nil {
		return im, err
	}
	base, err := benchimage.Base(o.sysroot, o.etcd)
	if err != nil {
		return im, err
	}
	ours := base
	ours.Etcd, ours.Init, ours.Seed, ours.Output = "", o.init, seed, im.ours
	floor := base
	floor.Init, floor.Output = o.floorInit, im.floor
	nometa := ours
	nometa.Cmdline, nometa.Output = "etcdbox.metadata=off", im.nometa
	for _, c := range []image.Config{ours, floor, nometa} {
		if _, err := image.Build(ctx, c); err != nil {
			return im, fmt.Errorf("build %s: %w", c.Output, err)
		}
	}
	return im, nil
}

// writeSeed writes a seed for cluster "bench", node "n1", that carries the
// CA in pkiDir (so the node issues its own server certificate), and
// returns its path. The network is the default: DHCP on the first NIC.
func writeSeed(pkiDir, path string) (string, error) {
	s := &seed.Seed{Cluster: "bench", Name: "n1"}
	var err error
	if s.PKI, _, err = seed.IssuingPKIFrom(pkiDir, s.NodeScope()); err != nil {
		return "", err
	}
	data, err := s.Marshal()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("write seed: %w", err)
	}
	return path, nil
}
