package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

func init() { commands = append(commands, newStatusCmd) }

// certWarning is how close to its expiry a node's certificate is flagged
// (DESIGN §6). Nodes renew at two thirds of a 90-day life, so a flagged
// certificate means renewal is failing.
const certWarning = 14 * 24 * time.Hour

// statusTarget is one node to ask: its name when known, and its node API
// endpoint.
type statusTarget struct {
	name, endpoint string
	err            error // set when the target could not even be formed
}

// statusResult is a node's answer or why there is none.
type statusResult struct {
	target statusTarget
	status nodeapi.Status
	err    error
}

func newStatusCmd() *cobra.Command {
	var (
		endpoints []string
		dir       string
		tf        tlsFlags
		timeout   time.Duration
		output    string
	)
	cmd := &cobra.Command{
		Use:   "status (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Show each node's image version, slot, member role, health and certificate expiry",
		Long: `Ask every node's API (mutual TLS with the admin certificate) for its
status and print one row per node: image and etcd versions, booted slot and
whether it is blessed, member role, leadership, health, etcd's database
against its quota, DATA's free space against its size, and the expiry of
the node's certificate (flagged when it is less than 14 days away). Lines
under the table tell of a rollback, a recovery, an upgrade or a CA
rotation under way, of the node's PKI warnings, of a database at 80% of
its quota or more, and of DATA with less free than the database may still
grow (the disk would fill before etcd's quota stops it).

--dir reads the nodes of a local cluster from DIR/state.json (etcdbox
cluster up) and the admin certificate from DIR/pki. --endpoints names the
node APIs directly (https://host:port, default port 9379); --pki is the
directory of ca.crt, admin.crt and admin.key (etcdbox pki init), or
--cacert, --cert and --key name those files anywhere. --timeout bounds
each node's answer; the nodes are asked at once.

The command exits 1 when any node does not answer, is not a healthy
member, or has a certificate that expires within 14 days (like etcdctl
endpoint health), after printing every row. -o json (or -o yaml, the
same document) prints one object per node: {"node", "endpoint",
"status" (the node API's GET /v1/status), or "error"}.`,
		Example: `  etcdbox status --dir run/
  etcdbox status --endpoints https://10.0.0.11:9379,https://10.0.0.12:9379 --pki pki/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			targets, files, err := nodeTargets(dir, tf, endpoints)
			if err != nil {
				return err
			}
			results := queryStatus(cmd.Context(), targets, files, timeout)
			now := time.Now()
			if output != "table" {
				if err := emit(cmd.OutOrStdout(), output, nodeStatusRows(results)); err != nil {
					return err
				}
			} else {
				printNodeStatus(cmd.OutOrStdout(), results, now)
			}
			return statusProblems(results, now)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&endpoints, "endpoints", nil, "node API endpoints, comma-separated (https://host:port)")
	f.StringVar(&dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	tf.add(cmd)
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for each node")
	addOutputFlag(cmd, &output, "output")
	cmd.MarkFlagsOneRequired("endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
	return cmd
}

// clusterTargets lists the nodes of the local cluster in dir, reached
// through their host loopback forwards.
func clusterTargets(dir string) ([]statusTarget, error) {
	st, err := cluster.ReadState(dir)
	if err != nil {
		if errors.Is(err, cluster.ErrNoCluster) {
			return nil, fmt.Errorf("%w; use --endpoints for nodes that etcdbox cluster did not start", err)
		}
		return nil, err
	}
	if len(st.Nodes) == 0 {
		return nil, fmt.Errorf("%s lists no nodes", filepath.Join(dir, cluster.StateFile))
	}
	var targets []statusTarget
	for _, n := range st.Nodes {
		t := statusTarget{name: n.Name}
		if n.APIPort == 0 {
			t.err = fmt.Errorf("no node API port in %s", cluster.StateFile)
		} else {
			t.endpoint = "https://127.0.0.1:" + strconv.Itoa(n.APIPort)
		}
		targets = append(targets, t)
	}
	return targets, nil
}

// queryStatus asks every target at once, each within timeout.
func queryStatus(ctx context.Context, targets []statusTarget, files nodeapi.TLSFiles, timeout time.Duration) []statusResult {
	results := make([]statusResult, len(targets))
	errs := askEach(ctx, targets, files, timeout, func(ctx context.Context, i int, c *nodeapi.Client) (err error) {
		results[i].status, err = c.Status(ctx)
		return err
	})
	for i, t := range targets {
		results[i].target, results[i].err = t, errs[i]
	}
	return results
}

// askEach calls ask with a client of every target's API at once, each
// within timeout, and returns what each call returned (or why the target
// could not be asked), in the targets' order.
func askEach(ctx context.Context, targets []statusTarget, files nodeapi.TLSFiles, timeout time.Duration, ask func(ctx context.Context, i int, c *nodeapi.Client) error) []error {
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		if t.err != nil {
			errs[i] = t.err
			continue
		}
		wg.Go(func() {
			c, err := nodeapi.NewClientFiles(t.endpoint, files)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = withinTimeout(ctx, ask(ctx, i, c), timeout)
		})
	}
	wg.Wait()
	return errs
}

// printNodeStatus writes the table, then one line per node whose upgrade
// agent is busy or failed.
func printNodeStatus(out io.Writer, results []statusResult, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tVERSION\tETCD\tSLOT\tBLESSED\tROLE\tLEADER\tHEALTH\tDB/QUOTA\tDATA FREE\tUPTIME\tKERNEL\tCERT EXPIRY")
	var notes []string
	for _, r := range results {
		name := r.target.name
		if r.err != nil {
			// The error goes last, where tabwriter does not align, so a
			// long message does not widen the columns of the other rows.
			state := "unreachable"
			if ae := (*nodeapi.Error)(nil); errors.As(r.err, &ae) {
				state = "error" // it answered, but not with a status
			}
			fmt.Fprintf(w, "%s\t-\t-\t-\t-\t-\t-\t%s\t-\t-\t-\t-\t%v\n", name, state, r.err)
			continue
		}
		s := r.status
		if r.target.name == r.target.endpoint && s.Name != "" {
			name = s.Name // --endpoints: the node tells its name
		}
		slot, blessed := "-", "-"
		if s.Slot != "" {
			slot, blessed = s.Slot, yesNo(s.Blessed)
		}
		role, leader := string(s.Member.Role), "-"
		if role == "" {
			role = string(nodeapi.RoleNone)
		}
		if s.Member.Role != nodeapi.RoleNone && s.Member.Role != "" {
			leader = yesNo(s.Member.Leader)
		}
		health := "unhealthy"
		if s.Member.Healthy {
			health = "healthy"
		}
		uptime := "-"
		if s.Uptime > 0 {
			uptime = roughDuration(s.Uptime)
		}
		db, data := storageCells(s.Storage)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, orDefault(s.Version, "-"), orDefault(s.EtcdVersion, "-"),
			slot, blessed, role, leader, health, db, data, uptime, orDefault(s.Kernel, "-"), certExpiry(s.CertExpiry, now))
		notes = append(notes, nodeNotes(name, s, now)...)
		notes = append(notes, storageNotes(name, s.Storage)...)
	}
	w.Flush()
	if note, _ := backupNote(results, now); note != "" {
		notes = append(notes, note)
	}
	if note := seedNote(results); note != "" {
		notes = append(notes, note)
	}
	for _, n := range append(notes, alarmNotes(results)...) {
		fmt.Fprintln(out, n)
	}
}

// nodeNotes are the lines printed under the table for one node: its last
// rollback, a lost quorum, a recovery or an upgrade under way, a CA
// rotation under way, its PKI warnings, and a machine without a hardware
// watchdog.
func nodeNotes(name string, s nodeapi.Status, now time.Time) []string {
	var notes []string
	if s.LastRollback != "" {
		notes = append(notes, fmt.Sprintf("%s: last rollback: %s", name, s.LastRollback))
	}
	if q := s.Quorum; q.Lost {
		notes = append(notes, fmt.Sprintf("%s: QUORUM LOST: no linearizable read since %s (%s ago); answering: %s; silent: %s. If the silent members are gone for good: %s",
			name, q.Since.UTC().Format(time.RFC3339), roughDuration(now.Sub(q.Since)), strings.Join(q.Answering, ", "), orDefault(strings.Join(q.Silent, ", "), "none"), q.Command))
	}
	if rc := s.Recovery; rc.Phase != "" && rc.Phase != nodeapi.RecoveryDone {
		notes = append(notes, fmt.Sprintf("%s: recovery %s stopped in phase %s; etcd stays stopped until the same etcdbox recover finishes it", name, rc.Token, rc.Phase))
	}
	if u := s.Upgrade; u.Phase != "" && u.Phase != nodeapi.PhaseIdle {
		note := fmt.Sprintf("%s: upgrade to %s: %s", name, orDefault(u.Target, "-"), u.Phase)
		if u.Error != "" {
			note += ": " + u.Error
		}
		notes = append(notes, note)
	}
	if r := s.PKI.Rotation; r.Phase != "" && r.Phase != nodeapi.RotationDrop {
		notes = append(notes, fmt.Sprintf("%s: CA rotation %s at phase %s", name, r.ID, r.Phase))
	}
	for _, w := range s.PKI.Warnings {
		notes = append(notes, fmt.Sprintf("%s: pki: %s", name, w))
	}
	if s.Watchdog == nodeapi.WatchdogNone {
		notes = append(notes, fmt.Sprintf("%s: no hardware watchdog: a hang is never reset, and a new slot that hangs stays hung until the machine is power-cycled (build the image with --driver for this machine's watchdog)", name))
	}
	return notes
}

// seedNote tells where each node's seed came from (nodeapi.Status's
// SeedSource: "ec2", "nocloud"...), the nodes grouped by source in the
// order they first appear: "seeds: n1, n2 from ec2; n3 from cache".
func seedNote(results []statusResult) string {
	var sources []string
	nodes := map[string][]string{}
	for _, r := range results {
		src := r.status.SeedSource
		if r.err != nil || src == "" {
			continue
		}
		name := r.target.name
		if name == r.target.endpoint && r.status.Name != "" {
			name = r.status.Name
		}
		if _, ok := nodes[src]; !ok {
			sources = append(sources, src)
		}
		nodes[src] = append(nodes[src], name)
	}
	var parts []string
	for _, src := range sources {
		parts = append(parts, strings.Join(nodes[src], ", ")+" from "+src)
	}
	if len(parts) == 0 {
		return ""
	}
	return "seeds: " + strings.Join(parts, "; ")
}

// backupNote describes the cluster's last scheduled backup, as the nodes
// report it, and says whether it is late: older than twice the interval.
func backupNote(results []statusResult, now time.Time) (string, bool) {
	var b nodeapi.BackupSchedule
	for _, r := range results {
		if r.err != nil {
			continue
		}
		rb := r.status.Backups
		b.Interval = max(b.Interval, rb.Interval)
		if rb.LastTaken.After(b.LastTaken) {
			b.LastNode, b.LastName, b.LastMember, b.LastTaken = rb.LastNode, rb.LastName, rb.LastMember, rb.LastTaken
		}
		if rb.FailedAt.After(b.FailedAt) {
			b.FailedNode, b.FailedAt, b.Failed = rb.FailedNode, rb.FailedAt, rb.Failed
		}
	}
	failed := ""
	if b.Failed != "" && b.FailedAt.After(b.LastTaken) {
		failed = fmt.Sprintf("; the last try, on %s %s ago, failed: %s", b.FailedNode, roughDuration(now.Sub(b.FailedAt)), b.Failed)
	}
	switch {
	case b.Interval == 0 && b.LastTaken.IsZero():
		return "", false
	case b.LastTaken.IsZero():
		return fmt.Sprintf("backups: every %s, none taken yet%s", b.Interval, failed), false
	}
	age := now.Sub(b.LastTaken)
	note := fmt.Sprintf("backups: every %s; the last, %s of member %s, is on %s, taken %s ago", b.Interval, b.LastName, b.LastMember, b.LastNode, roughDuration(age))
	late := b.Interval > 0 && age > 2*b.Interval
	if late {
		holder := b.LastNode
		if failed != "" {
			holder = b.FailedNode
		}
		note += " (LATE: more than twice the interval; see the holder's log, etcdbox logs " + holder + ")"
	}
	return note + failed, late
}

// raisedAlarms is the alarms the nodes report, once each, in order.
func raisedAlarms(results []statusResult) []string {
	var out []string
	for _, r := range results {
		if r.err != nil {
			continue
		}
		for _, a := range r.status.Member.Alarms {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// alarmNotes says what each raised alarm means.
func alarmNotes(results []statusResult) []string {
	var notes []string
	for _, a := range raisedAlarms(results) {
		switch {
		case strings.Contains(a, "NOSPACE"):
			notes = append(notes, "alarm "+a+": a database reached its quota, the cluster accepts only reads and deletes; etcdbox maintain makes room and disarms it")
		case strings.Contains(a, "CORRUPT"):
			notes = append(notes, "alarm "+a+": a member's data differs from the others'; replace that member (it is never cleared by itself)")
		default:
			notes = append(notes, "alarm "+a)
		}
	}
	return notes
}

// certExpiry shows a certificate's expiry date and how far away it is,
// flagged when it is within certWarning or past.
func certExpiry(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	date := t.UTC().Format(time.DateOnly)
	left := t.Sub(now)
	switch {
	case left <= 0:
		return fmt.Sprintf("%s (EXPIRED %s ago)", date, roughDuration(-left))
	case left < certWarning:
		return fmt.Sprintf("%s (in %s, EXPIRES SOON)", date, roughDuration(left))
	default:
		return fmt.Sprintf("%s (in %s)", date, roughDuration(left))
	}
}

// roughDuration is d in whole days, or hours under two days, or minutes
// under two hours.
func roughDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	case d >= 2*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	default:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// statusProblems returns the error status exits with: every node that did
// not answer, is not a healthy member, or whose certificate expires
// within certWarning; nil when there is none.
func statusProblems(results []statusResult, now time.Time) error {
	var down, problems []string
	for _, r := range results {
		name := r.target.name
		if r.err != nil {
			down = append(down, name)
			continue
		}
		s := r.status
		if r.target.name == r.target.endpoint && s.Name != "" {
			name = s.Name
		}
		if !s.Member.Healthy {
			problems = append(problems, name+": not a healthy member (role "+orDefault(string(s.Member.Role), string(nodeapi.RoleNone))+")")
		}
		if !s.CertExpiry.IsZero() && s.CertExpiry.Sub(now) < certWarning {
			problems = append(problems, name+": certificate "+certExpiry(s.CertExpiry, now))
		}
	}
	for _, a := range raisedAlarms(results) {
		problems = append(problems, "alarm "+a+" raised")
	}
	if note, late := backupNote(results, now); late {
		problems = append(problems, note)
	}
	if len(down) > 0 {
		problems = append([]string{fmt.Sprintf("%d of %d nodes did not answer: %s", len(down), len(results), strings.Join(down, ", "))}, problems...)
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}

// nodeStatusJSON is one node in status -o json.
type nodeStatusJSON struct {
	Node     string          `json:"node"`
	Endpoint string          `json:"endpoint,omitempty"`
	Status   *nodeapi.Status `json:"status,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// nodeStatusRows are the results of status -o json and -o yaml, in node
// order.
func nodeStatusRows(results []statusResult) []nodeStatusJSON {
	rows := []nodeStatusJSON{}
	for _, r := range results {
		row := nodeStatusJSON{Node: r.target.name, Endpoint: r.target.endpoint}
		if r.err != nil {
			row.Error = r.err.Error()
		} else {
			s := r.status
			row.Status = &s
			if r.target.name == r.target.endpoint && s.Name != "" {
				row.Node = s.Name
			}
		}
		rows = append(rows, row)
	}
	return rows
}
