package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

func newClusterDownCmd() *cobra.Command {
	var (
		dir     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "down --dir DIR",
		Short: "Power the cluster's VMs off and stop its network",
		Long: `Down presses each VM's ACPI power button, so that etcd stops cleanly, and
waits up to --timeout for the VM to power off; then it stops QEMU by force.
Then it stops the network daemon. It removes etcdctl.env and keeps the
disks, the CA and state.json: up on DIR boots the same cluster again.
Remove DIR to discard it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			c, err := cluster.Open(cluster.Config{Dir: dir, Log: lineLogger(out)})
			if err != nil {
				return err
			}
			if err := c.Down(cmd.Context(), timeout); err != nil {
				return err
			}
			lineLogger(out)("cluster in %s is down; disks and CA are kept (etcdbox cluster up --dir %s resumes it)", dir, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "cluster directory")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long each VM gets to power off before it is stopped by force")
	cmd.MarkFlagRequired("dir")
	return cmd
}
