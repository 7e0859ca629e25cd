package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

type upOptions struct {
	dir, image    string
	accel         string
	seedSource    string
	nodes, memory int
	cpus, disk    int
	timeout       time.Duration
	trustedKeys   []string // files
}

func newClusterUpCmd() *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "up --dir DIR",
		Short: "Boot a cluster and wait until every node is a voting member",
		Long: `Up boots --nodes VMs (n1, n2, ...) from one image, each with its only NIC on
a closed virtual network served by a daemon of this program. The network
gives each node a DHCP lease whose host name is the node's name, and DNS
with the cluster's A and SRV records; it answers no other name and routes
nothing anywhere. Every node boots with the same seed volume, which names
the SRV domain and the initial size: the nodes find each other by DNS and
form one cluster. Up returns once every node is a voting member and answers
a linearizable read over TLS with the admin certificate.

DIR holds everything: pki/ (a CA and admin certificate, made unless
pki/ca.crt exists), seed.img, net/ (the network daemon's sockets and log),
one directory per node (disk overlay, UEFI variables, console.log),
state.json and etcdctl.env (every node's endpoint). Without --image, up
builds DIR/etcdbox.img; an --image must have no node name in its seed.

After down, up on the same DIR resumes: the same nodes boot on their disks
(a new network daemon gets their hosts and forwards again).`,
		Example: "  etcdbox cluster up --nodes 3 --dir run/cluster\n  . run/cluster/etcdctl.env; etcdctl member list -w table",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case !cmd.Flags().Changed("nodes"):
				o.nodes = 0 // the default, or what DIR has
			case o.nodes < 1:
				return fmt.Errorf("--nodes %d: want at least 1", o.nodes)
			}
			if o.disk < 0 {
				return fmt.Errorf("--disk %d: want a size in MiB", o.disk)
			}
			return clusterUp(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.dir, "dir", "", "cluster directory (created if missing)")
	fl.IntVar(&o.nodes, "nodes", 3, "number of nodes of a new cluster")
	fl.StringVar(&o.image, "image", "", "raw, qcow2 or VMDK image to boot (default: build DIR/etcdbox.img)")
	fl.StringVar(&o.seedSource, "seed-source", "", "where a new cluster's nodes read their seed: nocloud (a seed volume, the default), configdrive (an OpenStack config drive), or a cloud's metadata the network serves at 169.254.169.254: ec2, gce, azure, openstack")
	fl.IntVar(&o.memory, "memory", 1024, "memory per node in MiB")
	fl.IntVar(&o.cpus, "cpus", 1, "virtual CPUs per node")
	fl.IntVar(&o.disk, "disk", cluster.DefaultDiskMiB, "disk per node in MiB: the image's disk is grown to it before boot, never shrunk")
	fl.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for the cluster")
	fl.StringArrayVar(&o.trustedKeys, "trusted-key", nil, "a new cluster's nodes stage only images signed by this public key (PEM; repeatable; see etcdbox sign)")
	addAccelFlag(fl, &o.accel)
	cmd.MarkFlagRequired("dir")
	return cmd
}

func clusterUp(ctx context.Context, stdout io.Writer, o upOptions) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	cfg, err := clusterConfig(dir, stdout)
	if err != nil {
		return err
	}
	cfg.MemoryMiB, cfg.CPUs, cfg.DiskMiB, cfg.Image, cfg.Accel = o.memory, o.cpus, o.disk, o.image, o.accel
	if err := cluster.CheckSeedSource(o.seedSource); err != nil {
		return usageError{fmt.Errorf("--seed-source: %w", err)}
	}
	cfg.SeedSource = o.seedSource
	for _, f := range o.trustedKeys {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--trusted-key: %w", err)
		}
		if _, err := imagesig.ParsePublicKey(string(b)); err != nil {
			return fmt.Errorf("--trusted-key %s: %w", f, err)
		}
		cfg.Upgrade.TrustedKeys = append(cfg.Upgrade.TrustedKeys, string(b))
	}
	st, err := cluster.ReadState(dir)
	resume := err == nil && len(st.Nodes) > 0
	if !resume && o.nodes == 0 {
		o.nodes = 3
	}
	if cfg.OVMFCode, cfg.OVMFVars, err = findOVMF(); err != nil && !resume {
		return err
	}
	if cfg.Image == "" && !resume {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if cfg.Image, err = ensureImage(ctx, stdout, dir); err != nil {
			return err
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	fmt.Fprintf(stdout, "network: closed and rootless: a virtual switch with DHCP and DNS, served by a daemon in this process tree (%s cluster netd),\n"+
		"  not the host's network and no root; guests reach only each other: no NAT, no route out, no DNS beyond the cluster's names.\n"+
		"  This machine reaches the nodes only through forwarded loopback ports.\n", os.Args[0])
	c, err := cluster.Up(ctx, cfg, o.nodes)
	if err != nil {
		if errors.Is(err, cluster.ErrUp) || c == nil {
			return err
		}
		return fmt.Errorf("%w\nthe VMs keep running for inspection; stop them with: etcdbox cluster down --dir %s", err, o.dir)
	}
	fmt.Fprintf(stdout, "\ncluster %s is up: %d voting members (%s)\n", cluster.Name, len(c.Nodes()), time.Since(start).Round(time.Second))
	for _, n := range c.Nodes() {
		fmt.Fprintf(stdout, "  %-4s %s.%s  %-12s %s\n", n.Name, n.Name, c.Domain(), n.IP, n.Endpoint())
	}
	usage(stdout, o.dir)
	return nil
}

// ensureImage returns dir's image, first building it when it is missing.
// It has no seed: every node gets the cluster's seed volume.
func ensureImage(ctx context.Context, stdout io.Writer, dir string) (string, error) {
	img := filepath.Join(dir, clusterImageFile)
	if _, err := os.Stat(img); err == nil {
		return img, nil
	}
	epoch, err := image.EpochFromEnv()
	if err != nil {
		return "", err
	}
	cfg := image.Config{Output: img, SourceDateEpoch: epoch, CacheDir: defaultCacheDir()}
	if err := defaultInputs(&cfg); err != nil {
		return "", err
	}
	fmt.Fprintf(stdout, "building %s\n", img)
	if _, err := image.Build(ctx, cfg); err != nil {
		return "", fmt.Errorf("build image %s: %w", img, err)
	}
	return img, nil
}
