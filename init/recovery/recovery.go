// Package recovery makes the survivor of a lost quorum the one member of a
// new cluster (DESIGN §5, `etcdbox recover --survivor NODE`), in phases
// recorded on DATA so that a recovery interrupted at any point is resumed
// by the same command and never runs twice.
//
// The phases (nodeapi.Recovery*):
//
//	fenced    the survivor's etcd is stopped, and stays stopped across
//	          reboots until the recovery goes on
//	saved     its database is copied into state/ as a snapshot (the
//	          database and its SHA-256, as etcd's Snapshot call writes
//	          one), verified, and kept for good
//	restored  its data dir is moved aside (kept), and the copy restored
//	          as the one member of a new cluster
//	done      the new member served as a voter
//
// # Snapshot restore, not --force-new-cluster
//
// etcd offers two ways to make one member a cluster again. The flag
// --force-new-cluster keeps the cluster ID and the member ID, and rewrites
// the membership in the WAL. A member of the old cluster that comes back
// later (a powered-off node, a partition that heals) then still speaks
// the same cluster ID: the new cluster refuses it only because its
// membership no longer lists it, and two old members that come back
// together would make the old quorum again and serve the old data beside
// the new cluster. Restoring a snapshot of the survivor's database with a
// new --initial-cluster-token (etcdutl's snapshot restore) gives a new
// member ID and a new cluster ID, which every member of the new cluster
// checks on every peer message: no old member can join it by accident,
// and the node's own refusal (member.Decide) can tell an old member by its
// cluster ID. It is also the path a restore from a backup takes, so both
// share one tested restore. Both lose the same thing: entries the survivor
// had in its log without knowing them committed (--force-new-cluster
// discards them too). The restore bumps the revision and marks it
// compacted, so that a watcher that saw a later revision from a member
// now gone gets a compaction error and reads again, never a revision that
// goes backwards.
package recovery

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/nodeapi"
)

// DefaultBump is how far the restored member's revision starts above the
// survivor's: more than any cluster writes while it is being recovered.
const DefaultBump = 1_000_000_000

// ErrRefused wraps a request that would break a rule: another node's
// name, a token of another cluster, a recovery under way with another
// token.
var ErrRefused = errors.New("refused")

// phases is the order of the phases.
var phases = []string{"", nodeapi.RecoveryFenced, nodeapi.RecoverySaved, nodeapi.RecoveryRestored, nodeapi.RecoveryDone}

// Reached reports whether r has reached phase.
func Reached(r nodeapi.Recovery, phase string) bool {
	return slices.Index(phases, r.Phase) >= slices.Index(phases, phase)
}

// Fenced reports whether r keeps etcd stopped: a recovery that started and
// has not restored the new member yet.
func Fenced(r nodeapi.Recovery) bool {
	return r.Phase == nodeapi.RecoveryFenced || r.Phase == nodeapi.RecoverySaved
}

// Decision is what Check makes of a request.
type Decision int

const (
	// Start: a new recovery, once the caller has checked that the quorum
	// is lost.
	Start Decision = iota
	// Resume: the recorded recovery, interrupted, goes on.
	Resume
	// NoOp: the recorded recovery is done; the request changes nothing.
	NoOp
)

// Check decides what a request does on node self, whose recorded
// recovery is rec, and whose current cluster and member give the token
// want (nodeapi.RecoveryToken; "" when the node does not know them). It is
// the fence: a token takes effect once, on the node and cluster it names.
func Check(rec nodeapi.Recovery, req nodeapi.RecoverRequest, self, want string) (Decision, string, error) {
	if req.Survivor != self {
		return 0, "", fmt.Errorf("%w: this node is %s, not %s", ErrRefused, self, req.Survivor)
	}
	if rec.Token != "" && rec.Token == req.Token {
		if rec.Phase == nodeapi.RecoveryDone {
			return NoOp, fmt.Sprintf("recovery %s was done on %s: cluster %s became cluster %s; nothing to do", rec.Token, rec.Updated.UTC().Format(time.RFC3339), rec.From, rec.To), nil
		}
		return Resume, fmt.Sprintf("resuming recovery %s from phase %s", rec.Token, rec.Phase), nil
	}
	if rec.Token != "" && rec.Phase != nodeapi.RecoveryDone {
		return 0, "", fmt.Errorf("%w: recovery %s is under way (phase %s); repeat its command to finish it", ErrRefused, rec.Token, rec.Phase)
	}
	if want == "" {
		return 0, "", fmt.Errorf("%w: this node does not know its cluster and member IDs (it never served as a voter)", ErrRefused)
	}
	if req.Token != want {
		return 0, "", fmt.Errorf("%w: token %s is not this node's: it is a member of the cluster token %s names; ask its status again", ErrRefused, req.Token, want)
	}
	return Start, "", nil
}

// TokenCluster returns the cluster ID a recovery token recovers from.
func TokenCluster(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, "recover-")
	if !ok {
		return "", false
	}
	cluster, member, ok := strings.Cut(rest, "-")
	return cluster, ok && cluster != "" && member != ""
}

// CheckRejoin decides what a rejoin request does on a node other than
// the survivor, whose recorded operation is rec and whose member data is
// of cluster (hex, "" when it has none): it moves its data aside and
// joins only when that data is of the cluster the token recovered from.
func CheckRejoin(rec nodeapi.Recovery, req nodeapi.RecoverRequest, self, cluster string) (Decision, string, error) {
	from, ok := TokenCluster(req.Token)
	switch {
	case req.Survivor == self:
		return 0, "", fmt.Errorf("%w: this node is the survivor; it does not rejoin", ErrRefused)
	case !ok:
		return 0, "", fmt.Errorf("%w: token %q is not a recovery token (recover-<cluster ID>-<member ID>)", ErrRefused, req.Token)
	case rec.Token == req.Token && rec.Phase == nodeapi.RecoveryDone:
		return NoOp, fmt.Sprintf("this node rejoined after recovery %s on %s; nothing to do", rec.Token, rec.Updated.UTC().Format(time.RFC3339)), nil
	case rec.Token == req.Token:
		return Resume, fmt.Sprintf("resuming the rejoin after recovery %s from phase %s", rec.Token, rec.Phase), nil
	case rec.Token != "" && rec.Phase != nodeapi.RecoveryDone:
		return 0, "", fmt.Errorf("%w: %s %s is under way (phase %s); repeat its command to finish it", ErrRefused, opName(rec), short(rec.Token), rec.Phase)
	case cluster == "":
		return NoOp, "this node holds no member of a known cluster: it joins the new cluster by itself", nil
	case cluster != from:
		return NoOp, fmt.Sprintf("this node's member is of cluster %s, not of cluster %s that recovery %s replaced; nothing to do", cluster, from, req.Token), nil
	}
	return Start, "", nil
}

// Load reads the record at path; a missing one is the zero Recovery.
func Load(path string) (nodeapi.Recovery, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nodeapi.Recovery{}, nil
	}
	if err != nil {
		return nodeapi.Recovery{}, err
	}
	var r nodeapi.Recovery
	if err := json.Unmarshal(b, &r); err != nil {
		return nodeapi.Recovery{}, fmt.Errorf("recovery record %s: %w", path, err)
	}
	if !slices.Contains(phases, r.Phase) {
		return nodeapi.Recovery{}, fmt.Errorf("recovery record %s: unknown phase %q", path, r.Phase)
	}
	return r, nil
}

// Save writes r to path atomically and durably: a temporary file, synced,
// renamed over path, and the directory synced.
func Save(path string, r nodeapi.Recovery) error {
	r.NoOp, r.Message = false, ""
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, func(w io.Writer) error { _, err := w.Write(append(b, '\n')); return err }); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// SaveDB copies the database at db (a stopped member's member/snap/db)
// to out as a snapshot file (the database, then its SHA-256, as etcd's
// Snapshot call writes one), durably, and verifies it (backup.Verify). A
// copy that fails is removed.
func SaveDB(db, out string) (backup.Stats, error) {
	in, err := os.Open(db)
	if err != nil {
		return backup.Stats{}, err
	}
	defer in.Close()
	tmp := out + ".tmp"
	err = writeSynced(tmp, func(w io.Writer) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), in); err != nil {
			return err
		}
		_, err := w.Write(h.Sum(nil))
		return err
	})
	if err != nil {
		os.Remove(tmp)
		return backup.Stats{}, fmt.Errorf("copy %s: %w", db, err)
	}
	st, err := backup.Verify(tmp)
	if err != nil {
		os.Remove(tmp)
		return backup.Stats{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return backup.Stats{}, err
	}
	return st, syncDir(filepath.Dir(out))
}

func writeSynced(path string, write func(io.Writer) error) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
