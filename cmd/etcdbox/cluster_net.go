package main

import (
	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// newClusterNetdCmd is the hidden `etcdbox cluster netd`: the network
// daemon that up starts, detached, and down stops through its control
// socket. It logs to stderr, which up points at DIR/net/netd.log.
func newClusterNetdCmd() *cobra.Command {
	var dir, domain string
	cmd := &cobra.Command{
		Use:    "netd --dir DIR/net",
		Short:  "Serve a cluster's closed virtual network (started by up)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.ServeNetwork(cmd.Context(), dir, domain, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the network's sockets")
	cmd.Flags().StringVar(&domain, "domain", cluster.DefaultDomain, "the cluster's DNS domain")
	cmd.MarkFlagRequired("dir")
	return cmd
}
