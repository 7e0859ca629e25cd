package main

import (
	"context"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// newClusterUpgradeCmd is `etcdbox cluster upgrade`: etcdbox upgrade for
// a local cluster, with the image taken from a file and pushed to the
// cluster's registry first.
func newClusterUpgradeCmd() *cobra.Command {
	var f upgradeFlags
	cmd := &cobra.Command{
		Use:   "upgrade --dir DIR (--image FILE|REF | --status | --abort)",
		Short: "Roll an image over a local cluster (see etcdbox upgrade)",
		Long: `Upgrade rolls an image over the local cluster in DIR, as etcdbox upgrade
does. FILE is an OCI image as etcdbox build --format oci writes it (a .tar
or an OCI layout directory): it is pushed to the cluster's registry, which
the network daemon serves to the guests on the gateway, and rolled by
digest. REF is an image reference pinned by digest that the guests can
pull.`,
		Example: `  etcdbox build --format oci --version v2 -o out/v2.oci.tar
  etcdbox cluster upgrade --dir run/ --image out/v2.oci.tar`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.image != "" && isFile(f.image) {
				ref, etcd, err := pushImageFile(cmd.Context(), f.dir, f.image)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pushed %s as %s\n", f.image, ref)
				f.image = ref
				if f.etcdVersion == "" {
					f.etcdVersion = etcd
				}
			}
			return runUpgrade(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	addUpgradeFlags(cmd, &f, false)
	cmd.MarkFlagRequired("dir")
	return cmd
}

func isFile(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// pushImageFile loads the OCI image in path (tarball or layout) and pushes
// it to the cluster's registry; it returns the guests' reference and the
// image's etcd version label.
func pushImageFile(ctx context.Context, dir, path string) (ref, etcd string, err error) {
	img, err := loadOCI(path)
	if err != nil {
		return "", "", err
	}
	if _, err := cluster.RegistryAddr(dir); err != nil {
		return "", "", err
	}
	c, err := cluster.Open(cluster.Config{Dir: dir})
	if err != nil {
		return "", "", err
	}
	ref, err = c.Push(ctx, img)
	if err != nil {
		return "", "", err
	}
	if cf, err := img.ConfigFile(); err == nil {
		etcd = cf.Config.Labels["io.etcdbox.etcd"]
	}
	return ref, etcd, nil
}

// loadOCI reads the one image of an OCI tarball or layout directory.
func loadOCI(path string) (v1.Image, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		img, err := tarball.ImageFromPath(path, nil)
		if err != nil {
			return nil, fmt.Errorf("read OCI tarball %s: %w", path, err)
		}
		return img, nil
	}
	lp, err := layout.FromPath(path)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", path, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", path, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout %s: %w", path, err)
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("OCI layout %s holds %d images, want 1", path, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
