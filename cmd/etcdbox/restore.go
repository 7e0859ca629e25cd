package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/nodeapi"
)

func init() { commands = append(commands, newRestoreCmd) }

func newRestoreCmd() *cobra.Command {
	var (
		f        nodeFlags
		rf       registryFlags
		snapshot string
		discard  []string
		seedNode string
	)
	cmd := &cobra.Command{
		Use:   "restore --snapshot FILE|BACKUP|REF --discard NODE,... (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Take the whole cluster back to a snapshot: a new cluster, every member's data moved aside",
		Long: `Restore takes the cluster back to a snapshot, explicitly: --snapshot is a
snapshot file, the name of a backup a node keeps (as etcdbox backup list
names it, fetched and verified), or a pushed backup's reference by digest
(host[:port]/path@sha256:..., pulled and verified), and --discard must name every node of the
cluster, whose current data is discarded (moved aside on each node, never
deleted).

Every node must answer and have room on DATA for its part: the seed for
the snapshot twice (as received and as restored), the others once (the new
cluster's database), and each 128 MiB for etcd's WAL. Otherwise nothing is
fenced, and the command names each node that is short.

Every node is fenced first: its etcd stops and stays stopped, across
reboots, until the restore goes on, so no member serves clients while the
cluster goes back. The snapshot goes to one node (--seed, default the first
name), which checks its SHA-256 and restores it as the one member of a new
cluster: a new cluster ID, the revision bumped by 1e9 and marked compacted,
so that clients' watches end with a compaction error and revisions never go
backwards. The other nodes move their data aside and join it as learners,
and are promoted.

Each node records each step before the next. The restore's token is the
snapshot's SHA-256: the same command resumes an interrupted restore, and
once it is done, a repeat changes nothing and says so.`,
		Example: `  etcdbox restore --snapshot etcd-20261202T071635.917687499Z.db --discard n1,n2,n3 --dir run/cluster
  etcdbox restore --snapshot saved.db --discard n1,n2,n3 --endpoints 10.0.0.11,10.0.0.12,10.0.0.13 --pki pki/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			return f.restore(ctx, cmd.OutOrStdout(), &rf, snapshot, discard, seedNode)
		},
	}
	f.add(cmd)
	rf.add(cmd, "")
	fl := cmd.Flags()
	fl.Lookup("timeout").DefValue, f.timeout = "10m0s", 10*time.Minute
	fl.StringVar(&snapshot, "snapshot", "", "a snapshot file, or the name of a backup a node keeps (required)")
	fl.StringSliceVar(&discard, "discard", nil, "every node of the cluster, comma-separated: their data is moved aside (required)")
	fl.StringVar(&seedNode, "seed", "", "the node that restores the snapshot; the others join it (default: the first of --discard)")
	_ = cmd.MarkFlagRequired("snapshot")
	_ = cmd.MarkFlagRequired("discard")
	return cmd
}

func (f *nodeFlags) restore(ctx context.Context, out io.Writer, rf *registryFlags, snapshot string, discard []string, seedNode string) error {
	file, cleanup, err := f.snapshotFile(ctx, rf, snapshot)
	if err != nil {
		return err
	}
	defer cleanup()
	st, err := backup.Verify(file)
	if err != nil {
		return fmt.Errorf("--snapshot %s: %w", snapshot, err)
	}
	token := nodeapi.RestoreToken(st.SHA256)
	fmt.Fprintf(out, "snapshot %s: revision %d, %d keys, sha256 %s, verified\n", snapshot, st.Revision, st.Keys, st.SHA256)

	targets, files, err := nodeTargets(f.dir, f.tls, f.endpoints)
	if err != nil {
		return err
	}
	results := queryStatus(ctx, targets, files, 10*time.Second)
	nodes, err := pickRestoreNodes(results, discard, seedNode)
	if err != nil {
		return err
	}
	seed := nodes[0]
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	if err := restoreRoom(results, seed.name, token, fi.Size()); err != nil {
		return err
	}
	// Fence every node; a node that answers NoOp is done with this
	// restore already.
	done := map[string]bool{}
	if err := nodes.ask(ctx, files, func(ctx context.Context, n restoreNode, c *nodeapi.Client) error {
		rc, err := c.Restore(ctx, nodeapi.RestoreRequest{Token: token, Step: nodeapi.RestoreFence})
		if err == nil && rc.NoOp {
			done[n.name] = true
			fmt.Fprintf(out, "%s: %s\n", n.name, rc.Message)
		} else if err == nil {
			fmt.Fprintf(out, "%s: fenced: etcd stopped (restore %s, phase %s)\n", n.name, short(token), rc.Phase)
		}
		return err
	}); err != nil {
		return err
	}
	if len(done) == len(nodes) {
		fmt.Fprintln(out, "the restore was done before: nothing to do")
		return nil
	}
	if !done[seed.name] {
		if err := nodes[:1].ask(ctx, files, func(ctx context.Context, n restoreNode, c *nodeapi.Client) error {
			fh, err := os.Open(file)
			if err != nil {
				return err
			}
			defer fh.Close()
			if _, err := c.SendRestoreSnapshot(ctx, token, fh); err != nil {
				return err
			}
			rc, err := c.Restore(ctx, nodeapi.RestoreRequest{Token: token, Step: nodeapi.RestoreSeed})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s: restored the snapshot as the one member of a new cluster (old data dir kept as %s)\n", n.name, orDefault(rc.Aside, "-"))
			return waitRestored(ctx, c)
		}); err != nil {
			return err
		}
	}
	rest := slices.DeleteFunc(slices.Clone(nodes[1:]), func(n restoreNode) bool { return done[n.name] })
	if err := rest.ask(ctx, files, func(ctx context.Context, n restoreNode, c *nodeapi.Client) error {
		rc, err := c.Restore(ctx, nodeapi.RestoreRequest{Token: token, Step: nodeapi.RestoreRejoin})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: data moved aside (kept as %s); joining the new cluster as a learner\n", n.name, orDefault(rc.Aside, "-"))
		return waitRestored(ctx, c)
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "restored: every node is a voter of the new cluster; revisions start %d above %d\n", int64(1_000_000_000), st.Revision)
	return nil
}

// snapshotFile returns a local file holding snapshot: the file itself, or
// the backup of that name fetched from the node that keeps it.
func (f *nodeFlags) snapshotFile(ctx context.Context, rf *registryFlags, snapshot string) (string, func(), error) {
	if _, err := os.Stat(snapshot); err == nil {
		return snapshot, func() {}, nil
	}
	if backup.IsRef(snapshot) {
		tmp, err := os.CreateTemp("", "etcdbox-restore-*.db")
		if err != nil {
			return "", nil, err
		}
		cleanup := func() { os.Remove(tmp.Name()) }
		_, sum, err := rf.pullBackup(ctx, snapshot, tmp)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			var st backup.Stats
			if st, err = backup.Verify(tmp.Name()); err == nil && st.SHA256 != sum {
				err = fmt.Errorf("the registry names SHA-256 %s, the artifact holds %s", sum, st.SHA256)
			}
		}
		if err != nil {
			cleanup()
			return "", nil, fmt.Errorf("--snapshot %s: %w", snapshot, err)
		}
		return tmp.Name(), cleanup, nil
	}
	if strings.ContainsRune(snapshot, os.PathSeparator) {
		return "", nil, fmt.Errorf("--snapshot %s: no such file", snapshot)
	}
	tmp, err := os.CreateTemp("", "etcdbox-restore-*.db")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.Remove(tmp.Name()) }
	_, _, err = f.fetchBackup(ctx, "", snapshot, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("--snapshot %s: not a file, and %w", snapshot, err)
	}
	return tmp.Name(), cleanup, nil
}

// restoreNode is one node of a restore.
type restoreNode struct {
	name, endpoint string
}

type restoreNodes []restoreNode

// pickRestoreNodes checks that every node answered and that discard names
// exactly them, and returns them with the seed first.
func pickRestoreNodes(results []statusResult, discard []string, seed string) (restoreNodes, error) {
	var nodes restoreNodes
	var names, silent []string
	for _, r := range results {
		name := r.target.name
		if r.err == nil && r.status.Name != "" {
			name = r.status.Name
		}
		if r.err != nil {
			silent = append(silent, fmt.Sprintf("%s (%v)", name, r.err))
			continue
		}
		nodes = append(nodes, restoreNode{name, r.target.endpoint})
		names = append(names, name)
	}
	if len(silent) > 0 {
		return nil, fmt.Errorf("every node must answer, to be fenced before the cluster goes back: no answer from %s", strings.Join(silent, "; "))
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(discard))
	if !slices.Equal(names, want) {
		return nil, fmt.Errorf("--discard must name every node of the cluster, whose data is moved aside: %s (got %s)", strings.Join(names, ","), strings.Join(want, ","))
	}
	if seed == "" {
		seed = discard[0]
	}
	i := slices.IndexFunc(nodes, func(n restoreNode) bool { return n.name == seed })
	if i < 0 {
		return nil, fmt.Errorf("--seed %s is not a node of the cluster (%s)", seed, strings.Join(names, ","))
	}
	nodes[0], nodes[i] = nodes[i], nodes[0]
	return nodes, nil
}

// ask runs do against every node at once, and returns their errors joined.
func (ns restoreNodes) ask(ctx context.Context, files nodeapi.TLSFiles, do func(context.Context, restoreNode, *nodeapi.Client) error) error {
	targets := make([]statusTarget, len(ns))
	for i, n := range ns {
		targets[i] = statusTarget{name: n.name, endpoint: n.endpoint}
	}
	errs := askEach(ctx, targets, files, time.Until(deadlineOr(ctx, 10*time.Minute)), func(ctx context.Context, i int, c *nodeapi.Client) error {
		if err := do(ctx, ns[i], c); err != nil {
			return fmt.Errorf("%s: %w", ns[i].name, err)
		}
		return nil
	})
	return joinErrs(errs)
}

func deadlineOr(ctx context.Context, d time.Duration) time.Time {
	if t, ok := ctx.Deadline(); ok {
		return t
	}
	return time.Now().Add(d)
}

func joinErrs(errs []error) error {
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("restore: %s; the same command resumes it", strings.Join(msgs, "; "))
}

// waitRestored waits until the node's member serves as a voter and its
// restore is done.
func waitRestored(ctx context.Context, c *nodeapi.Client) error {
	for {
		st, err := c.Status(ctx)
		if err == nil && st.Member.Healthy && st.Member.Role == nodeapi.RoleVoter && st.Recovery.Phase == nodeapi.RecoveryDone {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not a healthy voter of the new cluster yet: %w", ctx.Err())
		case <-time.After(time.Second): // poll interval, bounded by ctx
		}
	}
}

func short(token string) string {
	if len(token) > 24 {
		return token[:24] + "..."
	}
	return token
}

// restoreRoom checks, before any node is fenced, that every node has room
// on DATA for its part of the restore of a snapshot of snapSize bytes:
// the seed keeps the snapshot it receives and restores it into a new
// database beside it, each node that rejoins receives the new cluster's
// database from its leader, and each one's etcd starts a new WAL (walRoom
// covers it). A node's old data dir is only moved aside, which takes no
// room. Without this check a restore could stop half way, with every
// node fenced, on a full disk. Nodes already in this restore (a resume),
// and nodes that do not report their storage, are not checked: a node
// refuses what does not fit by itself.
func restoreRoom(results []statusResult, seed, token string, snapSize int64) error {
	var short []string
	for _, r := range results {
		st := r.status
		if r.err != nil || st.Storage.DataBytes == 0 || st.Recovery.Token == token {
			continue
		}
		name := orDefault(st.Name, r.target.name)
		need, what := snapSize+walRoom, "the new cluster's database"
		if name == seed {
			need, what = 2*snapSize+walRoom, "the snapshot as received and as restored"
		}
		if st.Storage.DataFree < need {
			short = append(short, fmt.Sprintf("%s has %s free and needs about %s (%s, and %s for etcd's WAL)",
				name, binarySize(st.Storage.DataFree), binarySize(need), what, binarySize(walRoom)))
		}
	}
	if len(short) == 0 {
		return nil
	}
	return fmt.Errorf("not enough room on DATA for the restore, so no node was fenced: %s; grow the disks (a node grows DATA with its disk at boot) and run the same command again", strings.Join(short, "; "))
}
