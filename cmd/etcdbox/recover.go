package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
)

func init() { commands = append(commands, newRecoverCmd) }

func newRecoverCmd() *cobra.Command {
	var (
		endpoints []string
		dir       string
		tf        tlsFlags
		survivor  string
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "recover --survivor NODE (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Make the survivor of a lost quorum the one member of a new cluster",
		Long: `Recover brings back a cluster that lost its quorum for good: the
survivor NODE keeps a verified copy of its database in its state/recovery/,
moves its data dir aside (kept), and restores the copy as the one member of
a new cluster, with a new cluster ID and its revision bumped by 1e9 and
marked compacted (watchers read again; revisions never go back). Nodes with
empty disks then join it as learners and are promoted; every other node
that answers and holds a member of the old cluster (without a quorum) moves
its data aside (kept) and joins too. A member of the old cluster that comes
back later with its data is refused, and keeps its data: run the same
command again to have it move its data aside and join.

Nothing does this by itself: a node that has lost its quorum says so in its
log and in etcdbox status, with this command. Run it only once the silent
members are known to be gone for good: a member that still runs elsewhere
with a quorum of its own would make two clusters. It refuses while the
survivor still serves linearizable reads, and while another node that
answers is a healthy voter. Pick the survivor with the highest revision
(etcdbox status, etcdctl endpoint status).

The command is fenced by a one-time token derived from the survivor's old
cluster and member IDs: an interrupted recovery is resumed by the same
command, and a repeat or a replay once it is done changes nothing.

--timeout bounds the whole command; the nodes' statuses are asked first,
each within 10s (or --timeout, when shorter).`,
		Example: `  etcdbox recover --survivor n3 --dir run/
  etcdbox recover --survivor n3 --endpoints 10.0.0.13 --pki pki/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			targets, files, err := nodeTargets(dir, tf, endpoints)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return runRecover(ctx, cmd.OutOrStdout(), survivor, queryStatus(ctx, targets, files, min(timeout, 10*time.Second)), files)
		},
	}
	f := cmd.Flags()
	f.StringVar(&survivor, "survivor", "", "the node whose member becomes the new cluster (required)")
	f.StringSliceVar(&endpoints, "endpoints", nil, "node API endpoints, comma-separated (https://host:port)")
	f.StringVar(&dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	tf.add(cmd)
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the survivor")
	_ = cmd.MarkFlagRequired("survivor")
	cmd.MarkFlagsOneRequired("endpoints", "dir")
	cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
	return cmd
}

// recoverRequest checks the nodes' statuses and returns the survivor's
// endpoint and the request to send it: the recorded token to resume or
// replay a recovery, or a new one when the survivor has lost its quorum
// and no other node that answers is a healthy voter.
func recoverRequest(survivor string, results []statusResult) (string, nodeapi.RecoverRequest, error) {
	var (
		endpoint string
		st       nodeapi.Status
		voters   []string
	)
	for _, r := range results {
		name := r.target.name
		if r.err == nil && r.status.Name != "" {
			name = r.status.Name
		}
		switch {
		case name == survivor && r.err != nil:
			return "", nodeapi.RecoverRequest{}, fmt.Errorf("survivor %s does not answer: %w", survivor, r.err)
		case name == survivor:
			endpoint, st = r.target.endpoint, r.status
		case r.status.Member.Healthy && r.status.Member.Role == nodeapi.RoleVoter:
			voters = append(voters, name)
		}
	}
	if endpoint == "" {
		return "", nodeapi.RecoverRequest{}, fmt.Errorf("no node %s answers", survivor)
	}
	req := nodeapi.RecoverRequest{Survivor: survivor}
	if rc := st.Recovery; rc.Token != "" && (rc.Phase != nodeapi.RecoveryDone || !st.Quorum.Lost) {
		// Resume it, or let the survivor say it is done.
		req.Token = rc.Token
		return endpoint, req, nil
	}
	if !st.Quorum.Lost {
		return "", req, fmt.Errorf("refused: %s has not lost its quorum (health %s, role %s): recovering it would split the cluster", survivor, healthWord(st.Member.Healthy), orDefault(string(st.Member.Role), "none"))
	}
	if len(voters) > 0 {
		return "", req, fmt.Errorf("refused: %s %s a healthy voter: the cluster has a quorum somewhere; recovering %s would split it", strings.Join(voters, ", "), isAre(len(voters)), survivor)
	}
	if st.Member.ClusterID == "" || st.Member.ID == "" {
		return "", req, fmt.Errorf("refused: %s does not know its cluster and member IDs (it never served as a voter)", survivor)
	}
	req.Token = nodeapi.RecoveryToken(st.Member.ClusterID, st.Member.ID)
	return endpoint, req, nil
}

func healthWord(ok bool) string {
	if ok {
		return "healthy"
	}
	return "unhealthy"
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func runRecover(ctx context.Context, out io.Writer, survivor string, results []statusResult, files nodeapi.TLSFiles) error {
	endpoint, req, err := recoverRequest(survivor, results)
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(out, "%s: no answer (%v): assumed gone for good; if it comes back with its data it is refused\n", r.target.name, r.err)
		}
	}
	c, err := nodeapi.NewClientFiles(endpoint, files)
	if err != nil {
		return err
	}
	defer c.Close()
	rc, err := c.Recover(ctx, req)
	if err != nil {
		return fmt.Errorf("recover %s: %w", survivor, err)
	}
	if rc.NoOp {
		fmt.Fprintf(out, "%s: %s\n", survivor, rc.Message)
		return rejoinOthers(ctx, out, req, results, files)
	}
	fmt.Fprintf(out, "%s: recovery %s: phase %s; cluster %s is left behind\n", survivor, rc.Token, rc.Phase, rc.From)
	fmt.Fprintf(out, "%s: the survivor's database (revision %d) is kept as %s; its old data dir as %s\n", survivor, rc.Revision, rc.Snapshot, orDefault(rc.Aside, "-"))
	// The new member serves once etcd has started on the restored data.
	for {
		st, err := c.Status(ctx)
		if err == nil && st.Member.Healthy && st.Recovery.Phase == nodeapi.RecoveryDone {
			fmt.Fprintf(out, "%s: serves as the one voter of cluster %s (revisions start %d above %d); nodes with empty disks join it as learners\n", survivor, st.Recovery.To, rc.Bump, rc.Revision)
			return rejoinOthers(ctx, out, req, results, files)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s restored the new member but it does not serve yet: %w (see etcdbox logs)", survivor, ctx.Err())
		case <-time.After(time.Second): // poll interval, bounded by ctx
		}
	}
}

// rejoinOthers asks every other node that answered to rejoin: one whose
// data is a member of the recovered cluster moves it aside and joins the
// new cluster as a learner; the others say there is nothing to do.
func rejoinOthers(ctx context.Context, out io.Writer, req nodeapi.RecoverRequest, results []statusResult, files nodeapi.TLSFiles) error {
	var targets []statusTarget
	for _, r := range results {
		if r.err == nil && r.status.Name != req.Survivor {
			targets = append(targets, statusTarget{name: orDefault(r.status.Name, r.target.name), endpoint: r.target.endpoint})
		}
	}
	rejoin := req
	rejoin.Rejoin = true
	msgs := make([]string, len(targets))
	errs := askEach(ctx, targets, files, time.Minute, func(ctx context.Context, i int, c *nodeapi.Client) error {
		rc, err := c.Recover(ctx, rejoin)
		if err == nil {
			msgs[i] = rc.Message
		}
		return err
	})
	var failed []string
	for i, t := range targets {
		if errs[i] != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", t.name, errs[i]))
			continue
		}
		fmt.Fprintf(out, "%s: %s\n", t.name, msgs[i])
	}
	if len(failed) > 0 {
		return fmt.Errorf("the survivor is recovered, but not every other node could rejoin (the same command asks them again): %s", strings.Join(failed, "; "))
	}
	return nil
}
