package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
)

// A restore from a snapshot (etcdbox restore, DESIGN §5), this node's part
// of it: the CLI fences every node, sends the snapshot to the seed node,
// has it restore the snapshot as the one member of a new cluster, then
// has the others move their data aside and join it as learners. Each step
// is recorded (state/recovery.json, as a recovery is) before it is taken
// as done, so the same command resumes an interrupted restore and is a
// no-op once it is done. Nothing here runs without that command.

// Restore is POST /v1/restore: see server.Node.
func (a *apiNode) Restore(ctx context.Context, req nodeapi.RestoreRequest) (nodeapi.Recovery, error) {
	return a.n.restoreStep(ctx, req)
}

// ReceiveSnapshot is POST /v1/restore/snapshot: see server.Node.
func (a *apiNode) ReceiveSnapshot(ctx context.Context, token string, r io.Reader) (nodeapi.Recovery, error) {
	return a.n.receiveSnapshot(token, r)
}

// refused marks recovery's refusals as the node API's (409), keeping
// their text as it is.
func refused(err error) error {
	if errors.Is(err, recovery.ErrRefused) {
		return refusal{err}
	}
	return err
}

type refusal struct{ error }

func (r refusal) Unwrap() error        { return r.error }
func (r refusal) Is(target error) bool { return target == server.ErrRefused }

func (n *node) restoreStep(ctx context.Context, req nodeapi.RestoreRequest) (nodeapi.Recovery, error) {
	n.recoverMu.Lock()
	defer n.recoverMu.Unlock()
	rec, err := recovery.Load(n.recoveryFile())
	if err != nil {
		return nodeapi.Recovery{}, err
	}
	dec, msg, err := recovery.CheckRestore(rec, req)
	if err != nil {
		n.log.Printf("restore: %v", err)
		return nodeapi.Recovery{}, refused(err)
	}
	switch dec {
	case recovery.NoOp:
		n.log.Printf("restore: %s", msg)
		rec.NoOp, rec.Message = true, msg
		return rec, nil
	case recovery.Start:
		cluster, _ := n.identity()
		now := time.Now().UTC()
		rec = nodeapi.Recovery{Op: nodeapi.OpRestore, Token: req.Token, From: cluster, Bump: recovery.DefaultBump, Started: now, Updated: now}
		n.log.Printf("restore: restore %s starts on the operator's request: etcd stops on this node and stays stopped until the restore goes on", req.Token)
	case recovery.Resume:
		n.log.Printf("restore: %s", msg)
	}
	if err := n.fence(&rec); err != nil {
		return rec, err
	}
	switch req.Step {
	case nodeapi.RestoreFence:
		return rec, nil
	case nodeapi.RestoreSeed:
		if !recovery.Reached(rec, nodeapi.RecoverySaved) {
			return rec, fmt.Errorf("%w: restore %s: this node has not received the snapshot (POST %s)", server.ErrRefused, rec.Token, nodeapi.PathRestoreSnapshot)
		}
		rec.Role = nodeapi.RestoreSeed
		if !recovery.Reached(rec, nodeapi.RecoveryRestored) {
			if err := n.restoreAsNew(&rec, rec.Snapshot); err != nil {
				n.log.Printf("restore: %s stopped in phase %s: %v; the same command resumes it", rec.Token, rec.Phase, err)
				return rec, err
			}
		}
	case nodeapi.RestoreRejoin:
		rec.Role = nodeapi.RestoreRejoin
		if err := n.asideToJoin(&rec); err != nil {
			return rec, err
		}
	}
	n.ensureLifecycle()
	return rec, nil
}

// receiveSnapshot keeps the snapshot of the fenced restore token, verified
// against the token's SHA-256, in state/recovery/.
func (n *node) receiveSnapshot(token string, r io.Reader) (nodeapi.Recovery, error) {
	n.recoverMu.Lock()
	defer n.recoverMu.Unlock()
	rec, err := recovery.Load(n.recoveryFile())
	if err != nil {
		return nodeapi.Recovery{}, err
	}
	switch {
	case rec.Op != nodeapi.OpRestore || rec.Token != token:
		return rec, fmt.Errorf("%w: restore %s has not fenced this node", server.ErrRefused, token)
	case recovery.Reached(rec, nodeapi.RecoverySaved):
		_, _ = io.Copy(io.Discard, r)
		rec.NoOp, rec.Message = true, "the snapshot was received before"
		return rec, nil
	}
	sha := strings.TrimPrefix(token, nodeapi.RestoreToken(""))
	if err := os.MkdirAll(n.recoveryDir(), 0o700); err != nil {
		return rec, err
	}
	snap := filepath.Join(n.recoveryDir(), token+".db")
	st, err := recovery.ReceiveSnapshot(r, snap, sha)
	if err != nil {
		n.log.Printf("restore: the snapshot of %s: %v", token, err)
		return rec, fmt.Errorf("%w: %w", server.ErrBadRequest, err)
	}
	rec.Snapshot, rec.Revision = snap, st.Revision
	n.log.Printf("restore: received the snapshot as %s (revision %d, %d keys), verified", snap, st.Revision, st.Keys)
	if err := n.advance(&rec, nodeapi.RecoverySaved); err != nil {
		return rec, err
	}
	return rec, nil
}
