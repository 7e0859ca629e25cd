package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func init() { commands = append(commands, newLogsCmd, newRebootCmd) }

// nodeFlags are the flags of a verb on one node through its API.
type nodeFlags struct {
	endpoints []string
	dir       string
	pkiDir    string
	timeout   time.Duration
}

func (f *nodeFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.endpoints, "endpoints", nil, "node API endpoints, comma-separated (https://host:port); the one whose status names NODE is asked")
	fl.StringVar(&f.dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	fl.StringVar(&f.pkiDir, "pki", "", "directory with ca.crt, admin.crt and admin.key (default DIR/pki with --dir)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the node")
	cmd.MarkFlagsOneRequired("endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
}

// with finds node among the targets and calls do with a client of its
// API, all within --timeout.
func (f *nodeFlags) with(ctx context.Context, node string, do func(context.Context, *nodeapi.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	targets, pkiDir, err := nodeTargets(f.dir, f.pkiDir, f.endpoints)
	if err != nil {
		return err
	}
	if _, err := nodeapi.AdminTLS(pkiDir); err != nil {
		return err
	}
	endpoint, err := findNode(ctx, node, targets, pkiDir, f.dir != "")
	if err != nil {
		return err
	}
	c, err := nodeapi.NewClient(endpoint, pkiDir)
	if err != nil {
		return err
	}
	defer c.Close()
	return do(ctx, c)
}

func newLogsCmd() *cobra.Command {
	var (
		f     nodeFlags
		lines int
	)
	cmd := &cobra.Command{
		Use:   "logs NODE (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Print the last lines of NODE's init and etcd log",
		Long: `Logs prints the last --lines lines of NODE's log, oldest first, as its
node API keeps them in memory (GET /v1/logs): the init's lines and etcd's,
which is what the serial console shows, without a console.`,
		Example: `  etcdbox logs n2 --dir run/ --lines 50
  etcdbox logs n2 --endpoints https://10.0.0.12:9379 --pki pki/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 1 || lines > nodeapi.MaxLogLines {
				return usageError{fmt.Errorf("--lines %d: want 1 to %d", lines, nodeapi.MaxLogLines)}
			}
			return f.with(cmd.Context(), args[0], func(ctx context.Context, c *nodeapi.Client) error {
				ls, err := c.Logs(ctx, lines)
				if err != nil {
					return fmt.Errorf("logs of %s: %w", args[0], err)
				}
				for _, l := range ls {
					if _, err := fmt.Fprintln(cmd.OutOrStdout(), l); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&lines, "lines", nodeapi.DefaultLogLines, "how many of the last lines")
	return cmd
}

func newRebootCmd() *cobra.Command {
	var f nodeFlags
	cmd := &cobra.Command{
		Use:   "reboot NODE (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Reboot NODE in order: leadership handed over, etcd stopped, disks synced",
		Long: `Reboot asks NODE's API to reboot (POST /v1/reboot) and returns once
the node accepted. The node shuts down in order: it hands leadership over
when it leads, stops etcd, syncs, and reboots into the slot the firmware
picks (its own, unless an upgrade armed the other). Follow it with
etcdbox status.`,
		Example: `  etcdbox reboot n2 --dir run/`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.with(cmd.Context(), args[0], func(ctx context.Context, c *nodeapi.Client) error {
				if err := c.Reboot(ctx); err != nil {
					return fmt.Errorf("reboot %s: %w", args[0], err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: rebooting\n", args[0])
				return err
			})
		},
	}
	f.add(cmd)
	return cmd
}
