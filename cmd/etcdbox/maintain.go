package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/rollout"
)

// The maintenance verbs keep a cluster writable (rollout.Maintenance):
// alarm list and disarm, defrag, maintain. None runs by itself.

func init() { commands = append(commands, newAlarmCmd, newDefragCmd, newMaintainCmd) }

// maintenance connects to the cluster the flags name, within ctx.
func maintenance(ctx context.Context, cmd *cobra.Command, f etcdFlags) (*rollout.Maintenance, func(), error) {
	cli, r, err := dialEtcd(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	m := &rollout.Maintenance{Client: cli, Endpoints: r.Endpoints, Logf: lineLogger(cmd.OutOrStdout())}
	return m, func() { cli.Close() }, nil
}

const etcdTargetUse = "(--endpoints URL[,URL...] --pki DIR | --etcd-endpoints URL[,URL...] --pki DIR | --dir DIR)"

func newAlarmCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alarm",
		Short: "List or disarm etcd's alarms (NOSPACE, CORRUPT)",
		Long: `etcd raises NOSPACE when a member's database reaches its quota (the
cluster then accepts only reads and deletes), and CORRUPT when a member's
data differs from the others'. alarm list shows them; alarm disarm clears
the alarms of one type. Clearing NOSPACE without making room raises it
again at the next write: etcdbox maintain makes room first.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newAlarmListCmd(), newAlarmDisarmCmd())
	return cmd
}

func newAlarmListCmd() *cobra.Command {
	var (
		f      etcdFlags
		output string
	)
	cmd := &cobra.Command{
		Use:     "list " + etcdTargetUse,
		Short:   "List the raised alarms: type and member",
		Example: "  etcdbox alarm list --dir run/cluster -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			return withMaintenance(cmd, f, func(m *rollout.Maintenance) error {
				alarms, err := m.Alarms(cmd.Context())
				if err != nil {
					return err
				}
				return printAlarms(cmd.OutOrStdout(), alarms, output)
			})
		},
	}
	addEtcdFlags(cmd, &f)
	addOutputFlag(cmd, &output, "output")
	return cmd
}

// alarmRows are the alarms of alarm list -o json and -o yaml.
func alarmRows(alarms []rollout.Alarm) []alarmJSON {
	rows := []alarmJSON{}
	for _, a := range alarms {
		rows = append(rows, alarmJSON{Type: a.Type, Member: a.Member, ID: fmt.Sprintf("%016x", a.ID)})
	}
	return rows
}

// printAlarms writes alarms to out as a table or, with output json or
// yaml, as an array of alarmJSON.
func printAlarms(out io.Writer, alarms []rollout.Alarm, output string) error {
	if output != "table" {
		return emit(out, output, alarmRows(alarms))
	}
	if len(alarms) == 0 {
		fmt.Fprintln(out, "no alarm is raised")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tMEMBER\tID")
	for _, a := range alarms {
		fmt.Fprintf(tw, "%s\t%s\t%016x\n", a.Type, a.Member, a.ID)
	}
	return tw.Flush()
}

// alarmJSON is one alarm of alarm list -o json.
type alarmJSON struct {
	Type   string `json:"type"`
	Member string `json:"member"`
	ID     string `json:"id"`
}

func newAlarmDisarmCmd() *cobra.Command {
	var typ string
	cmd := maintenanceCmd("disarm", "Clear the raised alarms of one type (--type nospace, the default, or corrupt)",
		`Disarm clears every raised alarm of one type. A CORRUPT alarm is cleared
only when named (--type corrupt): find out first which member's data
differs, and replace that member.`,
		"  etcdbox alarm disarm --dir run/cluster\n  etcdbox alarm disarm --type corrupt --dir run/cluster",
		func(cmd *cobra.Command, m *rollout.Maintenance) error {
			cleared, err := m.Disarm(cmd.Context(), typ)
			if err != nil {
				return err
			}
			if len(cleared) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no %s alarm was raised\n", strings.ToUpper(typ))
			}
			return nil
		}, 30*time.Second)
	cmd.Flags().StringVar(&typ, "type", "nospace", "the alarms to clear: nospace or corrupt")
	return cmd
}

// maintenanceCmd is a verb that runs step on the Maintenance of the
// cluster its flags name, within --timeout (default timeout).
func maintenanceCmd(use, short, long, example string, step func(*cobra.Command, *rollout.Maintenance) error, timeout time.Duration) *cobra.Command {
	var f etcdFlags
	cmd := &cobra.Command{
		Use: use + " " + etcdTargetUse, Short: short, Long: long, Example: example,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMaintenance(cmd, f, func(m *rollout.Maintenance) error { return step(cmd, m) })
		},
	}
	addEtcdFlags(cmd, &f)
	setDefaultTimeout(cmd, timeout)
	return cmd
}

// withMaintenance connects to the cluster f names, runs fn on it, and
// closes the connection, all within --timeout: fn's steps take
// cmd.Context(), which carries it.
func withMaintenance(cmd *cobra.Command, f etcdFlags, fn func(*rollout.Maintenance) error) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	cmd.SetContext(ctx)
	m, done, err := maintenance(ctx, cmd, f)
	if err != nil {
		return err
	}
	defer done()
	return etcdFailed(ctx, fn(m), m.Endpoints, f.timeout)
}

func newDefragCmd() *cobra.Command {
	return maintenanceCmd("defrag", "Defragment every member, one at a time, the leader last",
		`Defrag gives the space that compaction freed inside each member's
database back to the disk. A member is blocked while it defragments, so
they go one at a time, the leader last, and each only once every member
answers and one leads; it stops at the first member that does not.`,
		"  etcdbox defrag --dir run/cluster",
		func(cmd *cobra.Command, m *rollout.Maintenance) error { return m.Defrag(cmd.Context()) }, 10*time.Minute)
}

func newMaintainCmd() *cobra.Command {
	return maintenanceCmd("maintain", "Make a full cluster writable again: compact, defrag one member at a time, disarm NOSPACE",
		`Maintain brings a cluster that raised NOSPACE back to accepting writes,
keeping every key: it compacts the history up to the current revision,
defragments every member one at a time (the leader last), and disarms
NOSPACE once every member's database uses at most 80% of its quota. When
the live data itself fills the quota it says so and leaves the alarm
raised: raise the seed's etcd.quotaBackendBytes, or delete keys. A
CORRUPT alarm stops it before it changes anything.`,
		"  etcdbox maintain --dir run/cluster",
		func(cmd *cobra.Command, m *rollout.Maintenance) error { return m.Maintain(cmd.Context()) }, 30*time.Minute)
}
