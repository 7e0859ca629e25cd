package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

func newClusterAddCmd() *cobra.Command {
	var (
		dir     string
		accel   string
		timeout time.Duration
		opts    cluster.AddOptions
	)
	cmd := &cobra.Command{
		Use:   "add --dir DIR",
		Short: "Boot one more node, which joins the cluster",
		Long: `Add boots the next node (n4 after n1..n3) from the cluster's image and seed.
The network first gives it a lease and DNS records, which puts it in the
SRV records; the node finds the running cluster there, joins as a learner
and is promoted. Add returns once it is a voting member that answers a
linearizable read, and updates state.json and etcdctl.env.

--image boots the node from another image (another form of it, such as
the qcow2 or VMDK of build --format); --seed-source has it read its seed
from a cloud's metadata instead of the seed volume.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cluster.CheckSeedSource(opts.SeedSource); err != nil {
				return usageError{fmt.Errorf("--seed-source: %w", err)}
			}
			out := cmd.OutOrStdout()
			cfg, err := clusterConfig(dir, out)
			if err != nil {
				return err
			}
			cfg.Accel = accel
			c, err := cluster.Open(cfg)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			j, err := c.AddNode(ctx, opts)
			if err != nil {
				return fmt.Errorf("%w\nthe VMs keep running for inspection; stop them with: etcdbox cluster down --dir %s", err, dir)
			}
			how := "it was not seen as a learner"
			if j.AsLearner {
				how = fmt.Sprintf("a learner after %s", j.Learner.Round(time.Second))
			}
			fmt.Fprintf(out, "%s: a voting member after %s (%s); %d voting members; %s lists every node\n",
				j.Node.Name, j.Voter.Round(time.Second), how, len(c.Nodes()), cluster.EnvFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "cluster directory")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the node to vote")
	cmd.Flags().StringVar(&opts.Image, "image", "", "boot the node from this raw, qcow2 or VMDK image instead of the cluster's")
	cmd.Flags().StringVar(&opts.SeedSource, "seed-source", "", "where the node reads its seed: nocloud, configdrive, ec2, gce, azure, openstack, or several cloud services comma-separated (default: the cluster's)")
	addAccelFlag(cmd.Flags(), &accel)
	cmd.MarkFlagRequired("dir")
	return cmd
}
