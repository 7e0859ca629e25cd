package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func init() { commands = append(commands, newLogsCmd, newRebootCmd) }

// nodeFlags are the flags of a verb on one node through its API.
type nodeFlags struct {
	endpoints []string
	dir       string
	tls       tlsFlags
	timeout   time.Duration
}

func (f *nodeFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.endpoints, "endpoints", nil, "node API endpoints, comma-separated (https://host:port); the one whose status names NODE is asked")
	fl.StringVar(&f.dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	f.tls.add(cmd)
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the node")
	cmd.MarkFlagsOneRequired("endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
}

// with finds node among the targets and calls do with a client of its
// API, all within --timeout.
func (f *nodeFlags) with(ctx context.Context, node string, do func(context.Context, *nodeapi.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := f.client(ctx, node)
	if err != nil {
		return err
	}
	defer c.Close()
	return do(ctx, c)
}

// client finds node among the targets and returns a client of its API.
func (f *nodeFlags) client(ctx context.Context, node string) (*nodeapi.Client, error) {
	targets, files, err := nodeTargets(f.dir, f.tls, f.endpoints)
	if err != nil {
		return nil, err
	}
	endpoint, err := findNode(ctx, node, targets, files, f.dir != "", f.timeout)
	if err != nil {
		return nil, err
	}
	return nodeapi.NewClientFiles(endpoint, files)
}

func newLogsCmd() *cobra.Command {
	var (
		f      nodeFlags
		lines  int
		follow bool
		every  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs NODE (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Print the last lines of NODE's init and etcd log, or follow it (-f)",
		Long: `Logs prints the last --lines lines of NODE's log, oldest first, as its
node API keeps them in memory (GET /v1/logs): the init's lines and etcd's,
which is what the serial console shows, without a console.

-f follows the log: after the last lines it prints each new line as the
node logs it, until interrupted. It asks the node every --interval for
the lines after the last one it printed (the node numbers them), so it
loses none while the node keeps them (a note says how many it missed
when the node logged faster than it keeps), and it goes on across the
node's reboots: while the node does not answer it says so once and keeps
asking, and every line the new boot holds follows. --timeout bounds finding the
node and each request.`,
		Example: `  etcdbox logs n2 --dir run/ --lines 50
  etcdbox logs n2 -f --dir run/
  etcdbox logs n2 --endpoints https://10.0.0.12:9379 --pki pki/`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lines < 1 || lines > nodeapi.MaxLogLines {
				return usageError{fmt.Errorf("--lines %d: want 1 to %d", lines, nodeapi.MaxLogLines)}
			}
			if every <= 0 {
				return usageError{fmt.Errorf("--interval %s: want a positive duration", every)}
			}
			if follow {
				return f.follow(cmd.Context(), args[0], lines, every, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			return f.with(cmd.Context(), args[0], func(ctx context.Context, c *nodeapi.Client) error {
				ls, err := c.Logs(ctx, lines)
				if err != nil {
					return fmt.Errorf("logs of %s: %w", args[0], err)
				}
				return printLines(cmd.OutOrStdout(), ls)
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&lines, "lines", nodeapi.DefaultLogLines, "how many of the last lines")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print new lines as the node logs them, until interrupted")
	cmd.Flags().DurationVar(&every, "interval", 500*time.Millisecond, "with -f: how often to ask the node for new lines")
	return cmd
}

func printLines(w io.Writer, lines []string) error {
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// follow prints node's last lines, then its new ones, until ctx ends
// (an interrupt), which is a clean end.
func (f *nodeFlags) follow(ctx context.Context, node string, lines int, every time.Duration, out, errOut io.Writer) error {
	fctx, cancel := context.WithTimeout(ctx, f.timeout)
	c, err := f.client(fctx, node)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	var (
		last    uint64
		boot    string  // the node's boot, from its first answer
		newest  = lines // the first request takes the newest lines only
		silent  bool    // the node did not answer last time
		tick    = time.NewTicker(every)
		request = func() (nodeapi.LogPage, error) {
			rctx, cancel := context.WithTimeout(ctx, f.timeout)
			defer cancel()
			return c.LogsAfter(rctx, last, newest)
		}
	)
	defer tick.Stop()
	for {
		page, err := request()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && newest > 0:
			return fmt.Errorf("logs of %s: %w", node, err)
		case err != nil:
			if !silent {
				fmt.Fprintf(errOut, "etcdbox: %s does not answer (%v); still asking\n", node, err)
				silent = true
			}
		default:
			if silent {
				fmt.Fprintf(errOut, "etcdbox: %s answers again\n", node)
				silent = false
			}
			if boot != "" && page.Boot != boot && newest == 0 {
				// Another boot numbers its lines from 1 again: all
				// it holds follows.
				fmt.Fprintf(errOut, "etcdbox: %s booted again; its new log follows\n", node)
				boot, last = page.Boot, 0
				continue
			}
			if page.Dropped > 0 {
				fmt.Fprintf(errOut, "etcdbox: %d lines of %s were missed: the node logged faster than it keeps\n", page.Dropped, node)
			}
			if err := printLines(out, page.Lines); err != nil {
				return err
			}
			last, newest, boot = page.Last, 0, page.Boot
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func newRebootCmd() *cobra.Command {
	var f nodeFlags
	var noKexec bool
	cmd := &cobra.Command{
		Use:   "reboot NODE (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Reboot NODE in order: leadership handed over, etcd stopped, disks synced",
		Long: `Reboot asks NODE's API to reboot (POST /v1/reboot) and returns once
the node accepted. The node shuts down in order: it hands leadership over
when it leads, stops etcd, syncs, and reboots into the slot the firmware
picks (its own, unless an upgrade armed the other). Into a slot an
upgrade armed, it jumps with kexec, skipping the firmware, and counts the
try on its ESP as systemd-boot would; --no-kexec reboots through the
firmware anyway. Follow it with etcdbox status. --timeout bounds finding
the node and its answer.`,
		Example: `  etcdbox reboot n2 --dir run/`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.with(cmd.Context(), args[0], func(ctx context.Context, c *nodeapi.Client) error {
				if err := c.RebootWith(ctx, nodeapi.RebootRequest{NoKexec: noKexec}); err != nil {
					return fmt.Errorf("reboot %s: %w", args[0], err)
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: rebooting\n", args[0])
				return err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&noKexec, "no-kexec", false, "reboot through the firmware, even into a slot an upgrade armed")
	return cmd
}
