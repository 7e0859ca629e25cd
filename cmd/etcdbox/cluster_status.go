package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

func newClusterStatusCmd() *cobra.Command {
	var dir, output string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status --dir DIR",
		Short: "Show each node's VM state, member ID, role, leadership, health and boot slot",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := cluster.Open(cluster.Config{Dir: dir})
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			rows, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if output != "table" {
				return emit(cmd.OutOrStdout(), output, clusterStatusJSON(rows))
			}
			printStatus(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "cluster directory")
	addOutputFlag(cmd, &output, "output")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the nodes' answers")
	cmd.MarkFlagRequired("dir")
	return cmd
}

// printStatus writes the status table.
func printStatus(out io.Writer, rows []cluster.NodeStatus) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tVM\tMEMBER ID\tROLE\tLEADER\tHEALTH\tSLOT\tADDRESS\tENDPOINT")
	for _, r := range rows {
		id, leader := "-", "-"
		if r.MemberID != 0 {
			id, leader = fmt.Sprintf("%016x", r.MemberID), "no"
			if r.Leader {
				leader = "yes"
			}
		}
		addr := r.Node.IP.String()
		if r.Node.NextIP.IsValid() {
			addr += " (next " + r.Node.NextIP.String() + ")"
		}
		state := r.State
		if state == "" {
			state = "-"
		}
		var degraded []string
		if !r.Disk.Zero() {
			degraded = append(degraded, "disk "+r.Disk.String())
		}
		if r.Links != "" {
			degraded = append(degraded, "links "+r.Links)
		}
		if len(degraded) > 0 {
			state += " (" + strings.Join(degraded, "; ") + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node.Name, state, id, r.Role(), leader, r.Health, r.Slot, addr, r.Node.Endpoint())
	}
	w.Flush()
}
