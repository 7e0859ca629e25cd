package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// addAccelFlag adds --accel to a verb that boots VMs.
func addAccelFlag(fl *pflag.FlagSet, accel *string) {
	fl.StringVar(accel, "accel", "", "accelerator: auto (KVM when a test guest proves it runs, else TCG), kvm or tcg (default $"+qemu.AccelEnv+", else auto)")
}

// faultVerb is one of the fault verbs on nodes of a local cluster.
type faultVerb struct {
	use, short, long string
	args             cobra.PositionalArgs
	// run does the verb; timeout bounds it.
	run     func(ctx context.Context, c *cluster.Cluster, out io.Writer, args []string, o *faultOptions) error
	timeout time.Duration
	// boots: the verb starts VMs (it takes --accel).
	boots bool
}

type faultOptions struct {
	dir, accel string
	timeout    time.Duration
	grace      time.Duration
	noWait     bool
	oneWay     string
	disk       qemu.DiskLimit
	diskOff    bool
	lossPct    float64
	delay      time.Duration
}

// faultVerbs are the verbs of DESIGN §9 that inject one fault, or undo
// one. Each returns once the fault is in place.
var faultVerbs = []faultVerb{
	{use: "kill NODE", short: "Cut a node's power (QEMU quits at once)", args: cobra.ExactArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, _ *faultOptions) error {
			return c.Kill(ctx, a[0])
		}},
	{use: "poweroff NODE", short: "Press a node's ACPI power button and wait until it is off", args: cobra.ExactArgs(1), timeout: 2 * time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, o *faultOptions) error {
			return c.Poweroff(ctx, a[0], o.grace)
		}},
	{use: "reset NODE", short: "Press a node's reset button: it reboots without shutting down", args: cobra.ExactArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, _ *faultOptions) error {
			return c.Reset(ctx, a[0])
		}},
	{use: "pause NODE", short: "Freeze a node's VM (QMP stop): it misses heartbeats and answers nothing", args: cobra.ExactArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, _ *faultOptions) error {
			return c.Pause(ctx, a[0])
		}},
	{use: "resume NODE", short: "Thaw a paused node", args: cobra.ExactArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, _ *faultOptions) error {
			return c.Resume(ctx, a[0])
		}},
	{use: "start NODE...", short: "Boot stopped nodes on their disks and wait until the cluster is whole again",
		long: `Start boots stopped nodes (after kill, poweroff or wipe) on their disks; a
wiped node boots on a fresh copy of the image. Unless --no-wait, it then
waits until every node serves linearizable reads and the members are the
cluster's nodes, all voting.`,
		args: cobra.MinimumNArgs(1), timeout: 5 * time.Minute, boots: true,
		run: func(ctx context.Context, c *cluster.Cluster, out io.Writer, a []string, o *faultOptions) error {
			if err := c.Start(ctx, a...); err != nil {
				return err
			}
			if o.noWait {
				return nil
			}
			return c.WaitReady(ctx, a...)
		}},
	{use: "wipe NODE", short: "Replace a stopped node's disk with a fresh copy of the image (same name and MAC)",
		long: `Wipe models a replaced, empty disk: the stopped node's disk is deleted and
its next start boots on a fresh copy of the image, with the same name and
MAC (so the same DHCP lease and DNS name). The node stays stopped until
start. Everything on its DATA partition is gone.`,
		args: cobra.ExactArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, _ *faultOptions) error {
			return c.Wipe(ctx, a[0])
		}},
	{use: "partition NODE...", short: "Cut nodes off from the others on the network's switch, both ways (or one way)",
		long: `Partition cuts the named nodes off from the other nodes on the network's
switch, both ways; the named nodes still reach each other, and the host
reaches every node through its forwards. --one-way cuts one direction
only: "out" drops the named nodes' frames to the others (they hear the
others but cannot answer), "in" the others' frames to them (they are heard
but hear nothing). TCP needs both directions, so new connections fail
either way, while data already under way in the open direction keeps
arriving, unacknowledged. heal undoes both.`,
		args: cobra.MinimumNArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, o *faultOptions) error {
			if o.oneWay == "" {
				return c.Partition(ctx, a...)
			}
			return c.CutOneWay(ctx, o.oneWay == "out", a...) // PreRunE checked it
		}},
	{use: "limit-disk NODE", short: "Slow a node's disk to --iops requests or --bps bytes a second; --off gives it full speed back",
		long: `Limit-disk throttles the node's disk in QEMU, as a cloud volume out of
burst credits or a failing drive would be: requests beyond --iops a second
(reads and writes together) or --bps bytes a second wait. etcd's WAL syncs
slow down, and with them the member (a slow leader can lose its
leadership). The limit lasts until limit-disk --off, or until the VM
stops. cluster status shows it in the VM column.`,
		args: cobra.ExactArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, o *faultOptions) error {
			return c.LimitDisk(ctx, a[0], o.disk) // PreRunE checked it; --off left it zero
		}},
	{use: "impair NODE...", short: "Make nodes' links lossy (--loss PERCENT) or slow (--delay): a flaky NIC, a congested path",
		long: `Impair degrades the named nodes' links to the other nodes on the network's
switch: each frame is lost with probability --loss (a percentage, under
100) and the others wait --delay (up to 10s) before delivery; a frame
between two impaired nodes gets both. The host reaches every node through
its forwards at full speed. Impairing a node again replaces its
impairment; heal undoes them all. cluster status shows it in the VM
column.`,
		args: cobra.MinimumNArgs(1), timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, o *faultOptions) error {
			return c.Impair(ctx, o.lossPct/100, o.delay, a...)
		}},
	{use: "heal", short: "Undo every partition, one-way cut and impaired link", args: cobra.NoArgs, timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, _ []string, _ *faultOptions) error {
			return c.Heal(ctx)
		}},
	{use: "renumber", short: "Give every node a different address at its next DHCP lease (its next boot)", args: cobra.NoArgs, timeout: time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, out io.Writer, _ []string, _ *faultOptions) error {
			next, err := c.Renumber(ctx)
			if err != nil {
				return err
			}
			var names []string
			for n := range next {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, n := range names {
				fmt.Fprintf(out, "%s: next address %s (taken at its next boot)\n", n, next[n])
			}
			return nil
		}},
	{use: "remove NODE", short: "Remove a node's member, then power it off and delete it",
		long: `Remove takes a node out of the cluster for good: it removes the node's etcd
member through the other nodes (and refuses when the voters left would not
keep a healthy quorum), cuts the node's power, drops its DHCP lease, DNS
records and forwards, and deletes its directory.`,
		args: cobra.ExactArgs(1), timeout: 2 * time.Minute,
		run: func(ctx context.Context, c *cluster.Cluster, _ io.Writer, a []string, _ *faultOptions) error {
			return c.Remove(ctx, a[0])
		}},
}

// newFaultCmds returns the fault verbs as cobra commands.
func newFaultCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, v := range faultVerbs {
		o := &faultOptions{}
		cmd := &cobra.Command{
			Use:   v.use + " --dir DIR",
			Short: v.short,
			Long:  v.long,
			Args:  v.args,
			RunE: func(cmd *cobra.Command, args []string) error {
				out := cmd.OutOrStdout()
				cfg, err := clusterConfig(o.dir, out)
				if err != nil {
					return err
				}
				cfg.Accel = o.accel
				c, err := cluster.Open(cfg)
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
				defer cancel()
				return v.run(ctx, c, out, args, o)
			},
		}
		fl := cmd.Flags()
		fl.StringVar(&o.dir, "dir", "", "cluster directory")
		fl.DurationVar(&o.timeout, "timeout", v.timeout, "how long the verb may take")
		cmd.MarkFlagRequired("dir")
		switch name := strings.Fields(v.use)[0]; {
		case v.boots:
			addAccelFlag(fl, &o.accel)
			fl.BoolVar(&o.noWait, "no-wait", false, "return once the VMs run, without waiting for their members")
		case name == "poweroff":
			fl.DurationVar(&o.grace, "grace", 60*time.Second, "how long the guest gets to power off before QEMU is stopped by force")
		case name == "limit-disk":
			fl.Int64Var(&o.disk.IOPS, "iops", 0, "requests a second, reads and writes together (0: no limit on requests)")
			fl.Int64Var(&o.disk.BPS, "bps", 0, "bytes a second, read and written together (0: no limit on bytes)")
			fl.BoolVar(&o.diskOff, "off", false, "lift the limit: the disk's full speed")
			cmd.PreRunE = func(*cobra.Command, []string) error { return checkDiskFlags(o) }
		case name == "impair":
			fl.Float64Var(&o.lossPct, "loss", 0, "percentage of frames lost, at least 0 and under 100")
			fl.DurationVar(&o.delay, "delay", 0, "how long each frame waits, up to 10s")
			cmd.PreRunE = func(*cobra.Command, []string) error { return checkImpairFlags(o) }
		case name == "partition":
			fl.StringVar(&o.oneWay, "one-way", "", `cut one direction only: "out" (the named nodes' frames to the others) or "in" (the others' frames to them)`)
			cmd.PreRunE = func(*cobra.Command, []string) error {
				if o.oneWay != "" && o.oneWay != "out" && o.oneWay != "in" {
					return fmt.Errorf("--one-way %q: want out or in", o.oneWay)
				}
				return nil
			}
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// checkDiskFlags checks limit-disk's flags: --off alone, or a limit.
func checkDiskFlags(o *faultOptions) error {
	if err := o.disk.Check(); err != nil {
		return fmt.Errorf("--iops %d, --bps %d: negative", o.disk.IOPS, o.disk.BPS)
	}
	switch {
	case o.diskOff && !o.disk.Zero():
		return errors.New("--off lifts the limit: give it without --iops or --bps")
	case !o.diskOff && o.disk.Zero():
		return errors.New("give --iops or --bps (or both) to limit the disk, or --off to lift the limit")
	}
	return nil
}

// checkImpairFlags checks impair's flags before the network sees them.
func checkImpairFlags(o *faultOptions) error {
	switch {
	case o.lossPct < 0 || o.lossPct >= 100 || o.lossPct != o.lossPct:
		return fmt.Errorf("--loss %g: want a percentage of at least 0 and under 100 (all frames lost is a partition)", o.lossPct)
	case o.delay < 0 || o.delay > vnet.MaxImpairDelay:
		return fmt.Errorf("--delay %s: want 0 to %s", o.delay, vnet.MaxImpairDelay)
	case o.lossPct == 0 && o.delay == 0:
		return errors.New("give --loss or --delay (or both); heal undoes an impairment")
	}
	return nil
}
