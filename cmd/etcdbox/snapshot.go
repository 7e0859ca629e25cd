package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func init() { commands = append(commands, newSnapshotCmd) }

func newSnapshotCmd() *cobra.Command {
	var (
		f      nodeFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "snapshot NODE -o FILE (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Snapshot NODE's etcd member now and fetch it into FILE, verified",
		Long: `Snapshot asks NODE's API for an etcd snapshot of its member now (POST
/v1/snapshot): the node saves it on its DATA next to its backups, and
verifies it. The snapshot is then streamed into FILE and verified again
here, as backup get does: the SHA-256 etcd appended and the one the node
names, and the database read whole. FILE is written only when all of that
holds, and never overwritten. The node keeps the snapshot among its
backups (etcdbox backup list), pruned with them.`,
		Example: "  etcdbox snapshot n1 -o n1.db --dir run/cluster",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := args[0]
			return f.with(cmd.Context(), node, func(ctx context.Context, c *nodeapi.Client) error {
				s, err := c.Snapshot(ctx)
				if err != nil {
					return fmt.Errorf("snapshot of %s: %w", node, err)
				}
				return writeVerified(cmd.OutOrStdout(), output, s.Name, func(w io.Writer) (string, string, error) {
					sum, err := c.GetBackup(ctx, s.Name, w)
					if err != nil {
						return node, "", fmt.Errorf("fetch %s from %s: %w", s.Name, node, err)
					}
					return node, sum, nil
				})
			})
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "the file to write (required; never overwritten)")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
