package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

// A graceful decommission (DESIGN §5, scale-down): the node removes its own
// member, under the membership lock and the same quorum check as
// `etcdbox members remove` (rollout.Removal), after handing leadership
// over; it writes a tombstone in state/ before the removal, so that the
// member loop, which sees the removal, never joins again; then it powers
// off. The tombstone stays on DATA: the node, booted again, waits and
// says why. Wiping DATA (or deleting the file) lets it join as a new
// member.

// tombstoneFile is the tombstone's name in state/.
const tombstoneFile = "decommissioned"

// tombstone is what the file holds (JSON).
type tombstone struct {
	Name     string    `json:"name"`
	MemberID string    `json:"memberID"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

func tombstonePath(stateDir string) string { return filepath.Join(stateDir, tombstoneFile) }

// decommissioned reports whether the node was decommissioned, and why, in
// one line for the log: the member loop must not join or start etcd when
// it is true. A tombstone that cannot be read counts as one (failing
// closed: it is only ever written by a decommission).
func decommissioned(stateDir string) (bool, string) {
	b, err := os.ReadFile(tombstonePath(stateDir))
	if errors.Is(err, fs.ErrNotExist) {
		return false, ""
	}
	p := tombstonePath(stateDir)
	if err != nil {
		return true, fmt.Sprintf("decommissioned (%s unreadable: %v); this node does not rejoin: wipe DATA to add it as a new member", p, err)
	}
	var t tombstone
	if err := json.Unmarshal(b, &t); err != nil {
		return true, fmt.Sprintf("decommissioned (%s: %v); this node does not rejoin: wipe DATA to add it as a new member", p, err)
	}
	return true, fmt.Sprintf("decommissioned at %s (member %s, reason: %s); this node does not rejoin: wipe DATA to add it as a new member (%s)",
		t.At.UTC().Format(time.RFC3339), t.MemberID, orNone(t.Reason), p)
}

func orNone(s string) string {
	if s == "" {
		return "none given"
	}
	return s
}

// decommissionJob is one decommission, with the node's facts as plain
// values so that a test can run it against etcd on loopback.
type decommissionJob struct {
	name     string
	stateDir string
	// local reaches the node's own member; tls is the node's client TLS.
	local func() (*clientv3.Client, error)
	tls   *tls.Config
	now   func() time.Time
	logf  func(format string, args ...any)
}

// run removes the node's member and writes the tombstone, or says why not:
// errors wrap server.ErrBadRequest (another node's name), server.ErrBusy (already
// decommissioned) or server.ErrRefused (not a member, the last one, the
// quorum, the lock).
func (j decommissionJob) run(ctx context.Context, req nodeapi.DecommissionRequest) (nodeapi.Decommissioned, error) {
	if req.Node != j.name {
		return nodeapi.Decommissioned{}, fmt.Errorf("%w: this node is %s, not %s", server.ErrBadRequest, j.name, req.Node)
	}
	if dead, why := decommissioned(j.stateDir); dead {
		return nodeapi.Decommissioned{}, fmt.Errorf("%w: %s", server.ErrBusy, why)
	}
	local, err := j.local()
	if err != nil {
		return nodeapi.Decommissioned{}, err
	}
	defer local.Close()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ml, err := local.MemberList(lctx)
	cancel()
	if err != nil {
		return nodeapi.Decommissioned{}, fmt.Errorf("member list: %w", err)
	}
	var eps []string
	for _, m := range ml.Members {
		for _, u := range m.ClientURLs {
			if !slices.Contains(eps, u) {
				eps = append(eps, u)
			}
		}
	}
	cli, err := rollout.Dial(eps, j.tls)
	if err != nil {
		return nodeapi.Decommissioned{}, fmt.Errorf("connect to the members: %w", err)
	}
	defer cli.Close()
	out := nodeapi.Decommissioned{Node: j.name, Reason: req.Reason, Tombstone: tombstonePath(j.stateDir)}
	written := false
	r := rollout.Removal{
		Client: cli, TLS: j.tls, Endpoints: eps, Logf: j.logf,
		BeforeRemove: func(m rollout.MemberState) error {
			out.MemberID, out.At = strconv.FormatUint(m.ID, 16), j.now()
			if err := writeTombstone(j.stateDir, tombstone{Name: j.name, MemberID: out.MemberID, Reason: req.Reason, At: out.At}); err != nil {
				return err
			}
			written = true
			return nil
		},
	}
	j.logf("decommission: removing member %s (reason: %s)", j.name, orNone(req.Reason))
	if _, err := r.Remove(ctx, j.name); err != nil {
		if written && !j.stillMember(cli, out.MemberID) {
			// The removal went through though its answer was lost.
			j.logf("decommission: %v; the member is gone all the same", err)
			return out, nil
		}
		if written {
			if rerr := os.Remove(tombstonePath(j.stateDir)); rerr != nil {
				j.logf("decommission: remove the tombstone again: %v", rerr)
			}
		}
		if errors.Is(err, rollout.ErrRemoveRefused) || errors.Is(err, rollout.ErrMembershipLocked) {
			return nodeapi.Decommissioned{}, fmt.Errorf("%w: %w", server.ErrRefused, err)
		}
		return nodeapi.Decommissioned{}, err
	}
	j.logf("decommission: member %s (%s) removed; tombstone %s", j.name, out.MemberID, out.Tombstone)
	return out, nil
}

// stillMember reports whether id is in the member list, true when the
// list cannot be read (the tombstone is then taken back).
func (j decommissionJob) stillMember(cli *clientv3.Client, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return true
	}
	for _, m := range ml.Members {
		if strconv.FormatUint(m.ID, 16) == id {
			return true
		}
	}
	return false
}

// writeTombstone writes t into stateDir atomically, synced.
func writeTombstone(stateDir string, t tombstone) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("write tombstone: %w", err)
	}
	if err := pki.WriteFileAtomic(tombstonePath(stateDir), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write tombstone %s: %w", tombstonePath(stateDir), err)
	}
	return nil
}

// Decommission implements server.Node: it runs the decommission and, once the
// member is removed, powers the node off through the shutdown path (which
// lets the server send this answer first).
func (a *apiNode) Decommission(ctx context.Context, req nodeapi.DecommissionRequest) (nodeapi.Decommissioned, error) {
	n := a.n
	if n.supervisor() == nil {
		return nodeapi.Decommissioned{}, fmt.Errorf("%w: etcd is not running", server.ErrBusy)
	}
	m := n.localMember()
	tc, err := m.tlsConfig()
	if err != nil {
		return nodeapi.Decommissioned{}, err
	}
	j := decommissionJob{name: n.name, stateDir: n.stateDir(), local: m.client, tls: tc, now: time.Now, logf: n.log.Printf}
	d, err := j.run(ctx, req)
	if err != nil {
		return d, err
	}
	n.requestShutdown(fmt.Sprintf("decommissioned (reason: %s)", orNone(req.Reason)), false)
	return d, nil
}
