package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/member"
	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
)

// The quorum-loss recovery of this node as survivor (etcdbox recover,
// DESIGN §5; the phases and the choice of snapshot restore over
// --force-new-cluster are init/recovery's). It runs only on the
// operator's request, through the node API, after the quorum watch
// (quorum.go) has seen the quorum lost for longer than its bound.

// recoveryFile is the record of this node's recovery on DATA.
func (n *node) recoveryFile() string { return filepath.Join(n.stateDir(), "recovery.json") }

// identityFile records the cluster and member IDs (hex, one line) of the
// member this node last ran as a voter: the recovery token derives from
// it, and the member lifecycle tells an old cluster's data by it.
func (n *node) identityFile() string { return filepath.Join(n.stateDir(), "identity") }

// identity returns the recorded cluster and member IDs, "" when none.
func (n *node) identity() (cluster, id string) {
	b, err := os.ReadFile(n.identityFile())
	if err != nil {
		return "", ""
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return "", ""
	}
	return f[0], f[1]
}

// recordIdentity writes the cluster and member IDs of the member that
// serves as a voter, and finishes a recovery whose new member this is.
func (n *node) recordIdentity(ctx context.Context) error {
	c, err := n.localMember().client()
	if err != nil {
		return err
	}
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := c.Status(sctx, c.Endpoints()[0])
	if err != nil {
		return err
	}
	cluster, id := fmt.Sprintf("%x", st.Header.ClusterId), fmt.Sprintf("%x", st.Header.MemberId)
	if err := writeFileSynced(n.identityFile(), cluster+" "+id+"\n"); err != nil {
		return err
	}
	n.recoverMu.Lock()
	defer n.recoverMu.Unlock()
	rec, err := recovery.Load(n.recoveryFile())
	if err != nil || rec.Phase != nodeapi.RecoveryRestored {
		return err
	}
	rec.Phase, rec.To, rec.Updated = nodeapi.RecoveryDone, cluster, time.Now().UTC()
	if err := recovery.Save(n.recoveryFile(), rec); err != nil {
		return err
	}
	n.log.Printf("%s %s: done: this member serves cluster %s, which replaced cluster %s", opOf(rec), rec.Token, rec.To, rec.From)
	return nil
}

// writeFileSynced writes path atomically and durably.
func writeFileSynced(path, text string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Recover is POST /v1/recover: see server.Node.
func (a *apiNode) Recover(ctx context.Context, req nodeapi.RecoverRequest) (nodeapi.Recovery, error) {
	return a.n.recover(ctx, req)
}

func (n *node) recover(ctx context.Context, req nodeapi.RecoverRequest) (nodeapi.Recovery, error) {
	n.recoverMu.Lock()
	defer n.recoverMu.Unlock()
	rec, err := recovery.Load(n.recoveryFile())
	if err != nil {
		return nodeapi.Recovery{}, err
	}
	if req.Rejoin {
		return n.rejoin(ctx, rec, req)
	}
	cluster, id := n.identity()
	want := ""
	if cluster != "" {
		want = nodeapi.RecoveryToken(cluster, id)
	}
	dec, msg, err := recovery.Check(rec, req, n.name, want)
	if err != nil {
		n.log.Printf("recover: %v", err)
		return nodeapi.Recovery{}, refused(err)
	}
	switch dec {
	case recovery.NoOp:
		n.log.Printf("recover: %s", msg)
		rec.NoOp, rec.Message = true, msg
		return rec, nil
	case recovery.Start:
		q := n.quorumState()
		if !q.Lost {
			return nodeapi.Recovery{}, fmt.Errorf("%w: this node's member has not lost its quorum (it served a linearizable read within %s, or etcd is not running as a voter): recovering it would split the cluster", server.ErrRefused, quorumLossBound)
		}
		now := time.Now().UTC()
		rec = nodeapi.Recovery{Op: nodeapi.OpRecover, Token: req.Token, From: cluster, Bump: recovery.DefaultBump, Started: now, Updated: now}
		n.log.Printf("recover: recovery %s of cluster %s starts on the operator's request; members answering: %s; silent: %s",
			rec.Token, cluster, strings.Join(q.Answering, ", "), strings.Join(q.Silent, ", "))
	case recovery.Resume:
		n.log.Printf("recover: %s", msg)
	}
	if err := n.runRecovery(ctx, &rec); err != nil {
		n.log.Printf("recover: recovery %s stopped in phase %q: %v; the same command resumes it", rec.Token, rec.Phase, err)
		return rec, err
	}
	rec.Message = "the survivor restarts as the one member of a new cluster; wiped nodes join it as learners"
	return rec, nil
}

// advance records rec in phase, durably, before the phase's work is
// taken as done.
func (n *node) advance(rec *nodeapi.Recovery, phase string) error {
	rec.Phase, rec.Updated = phase, time.Now().UTC()
	if err := recovery.Save(n.recoveryFile(), *rec); err != nil {
		return err
	}
	n.log.Printf("%s: %s %s: %s", opOf(*rec), opOf(*rec), rec.Token, phase)
	return nil
}

func opOf(rec nodeapi.Recovery) string {
	if rec.Op == "" {
		return nodeapi.OpRecover
	}
	return rec.Op
}

// recoveryDir holds the snapshots recoveries and restores keep.
func (n *node) recoveryDir() string { return filepath.Join(n.stateDir(), "recovery") }

// restoreAsNew moves the data dir aside and restores snap as the one
// member of a new cluster (init/recovery), then records phase restored.
func (n *node) restoreAsNew(rec *nodeapi.Recovery, snap string) error {
	self := n.localMember()
	if err := n.dataAside(rec); err != nil {
		return err
	}
	m := recovery.Member{Name: self.Name, PeerURL: self.PeerURL(), Token: n.seed.Cluster + "-" + strconv.FormatInt(rec.Started.Unix(), 36)}
	work := filepath.Join(n.stateDir(), "restore-work")
	if err := recovery.Restore(snap, self.DataDir, work, m, uint64(rec.Bump)); err != nil {
		return err
	}
	return n.advance(rec, nodeapi.RecoveryRestored)
}

// fence records rec as fenced, once, and keeps etcd stopped until rec is
// restored: startLifecycle starts no member while the record says so,
// across reboots too.
func (n *node) fence(rec *nodeapi.Recovery) error {
	if !recovery.Reached(*rec, nodeapi.RecoveryFenced) {
		if err := n.advance(rec, nodeapi.RecoveryFenced); err != nil {
			return err
		}
	}
	if recovery.Reached(*rec, nodeapi.RecoveryRestored) {
		return nil
	}
	return n.stopLifecycle()
}

// asideToJoin moves the data dir aside and records rec restored, once:
// the member lifecycle then joins the new cluster as a learner.
func (n *node) asideToJoin(rec *nodeapi.Recovery) error {
	if recovery.Reached(*rec, nodeapi.RecoveryRestored) {
		return nil
	}
	if err := n.dataAside(rec); err != nil {
		return err
	}
	return n.advance(rec, nodeapi.RecoveryRestored)
}

// dataAside moves the data dir aside (kept, in state/removed-*) and
// forgets the old member's identity: the new one is recorded once it
// serves.
func (n *node) dataAside(rec *nodeapi.Recovery) error {
	to, err := member.MoveAside(n.localMember().DataDir, n.stateDir())
	if err != nil {
		return fmt.Errorf("move the old data dir aside: %w", err)
	}
	if to != "" {
		rec.Aside = to
		n.log.Printf("%s: moved the old data dir to %s (kept)", opOf(*rec), to)
	}
	if err := os.Remove(n.identityFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// rejoin moves this node's data aside and joins the survivor's new
// cluster, when that data is a member of the cluster the recovery
// replaced and its member has no quorum (a member that serves is never
// moved).
func (n *node) rejoin(ctx context.Context, rec nodeapi.Recovery, req nodeapi.RecoverRequest) (nodeapi.Recovery, error) {
	cluster, _ := n.identity()
	dec, msg, err := recovery.CheckRejoin(rec, req, n.name, cluster)
	if err != nil {
		n.log.Printf("recover: rejoin: %v", err)
		return nodeapi.Recovery{}, refused(err)
	}
	switch dec {
	case recovery.NoOp:
		n.log.Printf("recover: rejoin: %s", msg)
		out := rec
		out.NoOp, out.Message = true, msg
		return out, nil
	case recovery.Start:
		if n.supervisor() != nil {
			if c, err := n.localMember().client(); err == nil {
				serves := ready(ctx, c) == nil
				c.Close()
				if serves {
					return nodeapi.Recovery{}, fmt.Errorf("%w: this node's member serves linearizable reads: it has a quorum, and is not moved", server.ErrRefused)
				}
			}
		}
		now := time.Now().UTC()
		rec = nodeapi.Recovery{Op: nodeapi.OpRecover, Role: nodeapi.RestoreRejoin, Token: req.Token, From: cluster, Started: now, Updated: now}
		n.log.Printf("recover: rejoin: this node's member of cluster %s, which recovery %s replaced, moves its data aside and joins the new cluster", cluster, req.Token)
	case recovery.Resume:
		n.log.Printf("recover: rejoin: %s", msg)
	}
	if err := n.fence(&rec); err != nil {
		return rec, err
	}
	if err := n.asideToJoin(&rec); err != nil {
		return rec, err
	}
	n.ensureLifecycle()
	rec.Message = "the data is moved aside; the node joins the new cluster as a learner"
	return rec, nil
}

// followDirective runs the seed's recovery directive, if it names this
// node, once the quorum watch has seen the quorum lost: the operator's
// explicit word, given ahead, bound to the cluster and member its token
// names. A directive for another node, for another cluster, or already
// carried out changes nothing, and says so. It runs once per boot.
func (n *node) followDirective(ctx context.Context) {
	d := n.seed.Recovery
	if d == nil {
		return
	}
	if d.Survivor != n.name {
		n.log.Printf("recover: the seed's recovery directive names %s as the survivor, not this node: nothing to do here", d.Survivor)
		return
	}
	n.log.Printf("recover: the quorum is lost and the seed's recovery directive names this node (token %s)", d.Token)
	rec, err := n.recover(ctx, nodeapi.RecoverRequest{Survivor: d.Survivor, Token: d.Token})
	switch {
	case err != nil:
		n.log.Printf("recover: the seed's recovery directive is not carried out: %v", err)
	case rec.NoOp:
		n.log.Printf("recover: the seed's recovery directive is a no-op: %s", rec.Message)
	}
}

// runRecovery takes rec from its phase to restored, saving each phase
// before the next begins, and starts the member lifecycle again.
func (n *node) runRecovery(ctx context.Context, rec *nodeapi.Recovery) error {
	self := n.localMember()
	db := filepath.Join(self.DataDir, "member", "snap", "db")
	dir := n.recoveryDir()
	snap := filepath.Join(dir, rec.Token+".db")
	// A recovery resumed once restored leaves the new member running.
	if err := n.fence(rec); err != nil {
		return err
	}
	if !recovery.Reached(*rec, nodeapi.RecoverySaved) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		st, err := recovery.SaveDB(db, snap)
		if err != nil {
			return fmt.Errorf("keep a copy of the survivor's database: %w", err)
		}
		rec.Snapshot, rec.Revision = snap, st.Revision
		n.log.Printf("recover: kept the survivor's database as %s (revision %d, %d keys, sha256 %s)", snap, st.Revision, st.Keys, st.SHA256)
		if err := n.advance(rec, nodeapi.RecoverySaved); err != nil {
			return err
		}
	}
	if !recovery.Reached(*rec, nodeapi.RecoveryRestored) {
		if err := n.restoreAsNew(rec, snap); err != nil {
			return err
		}
	}
	n.ensureLifecycle()
	return nil
}

// startLifecycle starts the member lifecycle under a context of its own,
// unless a recovery record fences this node's etcd.
func (n *node) startLifecycle(ctx context.Context) {
	if rec, err := recovery.Load(n.recoveryFile()); err != nil {
		n.log.Printf("membership: %v; etcd stays stopped until the record is fixed", err)
		return
	} else if recovery.Fenced(rec) {
		n.log.Printf("membership: %s %s stopped in phase %s: etcd stays stopped; repeat the etcdbox %s command to finish it", opOf(rec), rec.Token, rec.Phase, opOf(rec))
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	done := supervise.Go(lctx, "member lifecycle", n.log.Printf, n.lifecycle)
	n.mu.Lock()
	n.lifecycleStop = func() <-chan struct{} { cancel(); return done }
	n.mu.Unlock()
}

// ensureLifecycle starts the member lifecycle unless it runs.
func (n *node) ensureLifecycle() {
	n.mu.Lock()
	running := n.lifecycleStop != nil
	n.mu.Unlock()
	if !running {
		n.startLifecycle(n.ctx)
	}
}

// stopLifecycle stops the member lifecycle and etcd, and returns once etcd
// has exited.
func (n *node) stopLifecycle() error {
	n.mu.Lock()
	stop := n.lifecycleStop
	n.lifecycleStop = nil
	n.mu.Unlock()
	if stop != nil {
		// The lifecycle returns once its context ends; then no round
		// can start another etcd.
		select {
		case <-stop():
		case <-time.After(2 * time.Minute):
			return errors.New("the member lifecycle did not stop within 2m")
		}
	}
	sup := n.supervisor()
	if sup == nil {
		return nil
	}
	if err := sup.Stop(time.Minute); err != nil {
		return fmt.Errorf("stop etcd: %w", err)
	}
	n.log.Printf("recover: etcd stopped")
	return nil
}
