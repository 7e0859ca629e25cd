package recovery

import (
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

// A restore from a snapshot (etcdbox restore) goes through the same phases
// on every node, in the CLI's order: fenced on all (etcd stopped, for
// good until the restore goes on), saved on the seed node (the snapshot
// received and verified against the token's SHA-256), restored (the data
// dir moved aside; on the seed the snapshot restored as the one member of
// a new cluster), done (the member served as a voter of the new cluster,
// the others having joined as learners).

// CheckRestore decides what a restore step does on a node whose recorded
// operation is rec. A new token starts only with the fence step; a step
// of the recorded restore goes on from where it is (a step already taken
// changes nothing); a restore that is done is a NoOp; and an operation
// under way with another token is refused.
func CheckRestore(rec nodeapi.Recovery, req nodeapi.RestoreRequest) (Decision, string, error) {
	if !slices.Contains([]string{nodeapi.RestoreFence, nodeapi.RestoreSeed, nodeapi.RestoreRejoin}, req.Step) {
		return 0, "", fmt.Errorf("%w: unknown restore step %q (want %s, %s or %s)", ErrRefused, req.Step, nodeapi.RestoreFence, nodeapi.RestoreSeed, nodeapi.RestoreRejoin)
	}
	if !strings.HasPrefix(req.Token, nodeapi.RestoreToken("")) || len(req.Token) != len(nodeapi.RestoreToken(""))+64 {
		return 0, "", fmt.Errorf("%w: token %q is not a restore token (restore-<the snapshot's SHA-256>)", ErrRefused, req.Token)
	}
	if rec.Token == req.Token {
		if rec.Phase == nodeapi.RecoveryDone {
			return NoOp, fmt.Sprintf("restore %s was done on %s: cluster %s became cluster %s; nothing to do", short(rec.Token), rec.Updated.UTC().Format(time.RFC3339), rec.From, rec.To), nil
		}
		if req.Step != nodeapi.RestoreFence && rec.Role != "" && rec.Role != req.Step {
			return 0, "", fmt.Errorf("%w: this node takes restore %s as %s, not %s", ErrRefused, short(rec.Token), rec.Role, req.Step)
		}
		return Resume, fmt.Sprintf("restore %s: %s (phase %s)", short(rec.Token), req.Step, rec.Phase), nil
	}
	if rec.Token != "" && rec.Phase != nodeapi.RecoveryDone {
		return 0, "", fmt.Errorf("%w: %s %s is under way (phase %s); repeat its command to finish it", ErrRefused, opName(rec), short(rec.Token), rec.Phase)
	}
	if req.Step != nodeapi.RestoreFence {
		return 0, "", fmt.Errorf("%w: restore %s has not fenced this node: run the whole etcdbox restore again", ErrRefused, short(req.Token))
	}
	return Start, "", nil
}

func opName(rec nodeapi.Recovery) string {
	if rec.Op == "" {
		return nodeapi.OpRecover
	}
	return rec.Op
}

// short cuts a restore token for messages.
func short(token string) string {
	if len(token) > 24 {
		return token[:24] + "..."
	}
	return token
}

// MaxSnapshot bounds a snapshot sent to a node: etcd's largest quota
// (8 GiB) and its digest.
const MaxSnapshot = 8<<30 + 32

// ReceiveSnapshot copies a snapshot file from r to out, durably, and
// verifies it (backup.Verify): its SHA-256 must be sha256 (hex). A copy
// that fails is removed.
func ReceiveSnapshot(r io.Reader, out, sha256 string) (backup.Stats, error) {
	tmp := out + ".tmp"
	var n int64
	err := writeSynced(tmp, func(w io.Writer) error {
		var err error
		n, err = io.Copy(w, io.LimitReader(r, MaxSnapshot+1))
		return err
	})
	if err == nil && n > MaxSnapshot {
		err = fmt.Errorf("the snapshot is larger than %d bytes", int64(MaxSnapshot))
	}
	if err != nil {
		os.Remove(tmp)
		return backup.Stats{}, err
	}
	st, err := backup.Verify(tmp)
	if err == nil && st.SHA256 != sha256 {
		err = fmt.Errorf("the snapshot's SHA-256 is %s, the restore's token names %s", st.SHA256, sha256)
	}
	if err != nil {
		os.Remove(tmp)
		return backup.Stats{}, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return backup.Stats{}, err
	}
	return st, syncDir(filepath.Dir(out))
}
