package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Member is the one member a snapshot is restored as.
type Member struct {
	// Name and PeerURL are the member's (--name, its peer URL).
	Name, PeerURL string
	// Token is the new cluster's --initial-cluster-token: a token the old
	// cluster never used gives a new member ID and a new cluster ID.
	Token string
}

// Restore restores the snapshot file at snap (verified by its SHA-256)
// into dataDir as the one member m of a new cluster, with the revision
// bumped by bump and marked compacted (bump 0: neither). dataDir must be
// empty (the caller moved the old data aside); it stays, so it may be a
// mount point. The restore goes into work (a sibling of dataDir on the
// same filesystem, removed first: what an interrupted restore left there
// is redone), and its member directory is renamed into dataDir last, so
// dataDir holds either nothing or the whole restored member.
func Restore(snap, dataDir, work string, m Member, bump uint64) error {
	if entries, err := os.ReadDir(dataDir); err != nil {
		return err
	} else if len(entries) > 0 {
		return fmt.Errorf("restore into %s: it is not empty", dataDir)
	}
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	cfg := snapshot.RestoreConfig{
		SnapshotPath:        snap,
		Name:                m.Name,
		OutputDataDir:       work,
		PeerURLs:            []string{m.PeerURL},
		InitialCluster:      m.Name + "=" + m.PeerURL,
		InitialClusterToken: m.Token,
		RevisionBump:        bump,
		MarkCompacted:       bump > 0,
	}
	if err := snapshot.NewV3(zap.NewNop()).Restore(cfg); err != nil {
		return fmt.Errorf("restore %s: %w", snap, err)
	}
	from := filepath.Join(work, "member")
	if _, err := os.Stat(from); err != nil {
		return errors.New("restore left no member directory")
	}
	if err := os.Rename(from, filepath.Join(dataDir, "member")); err != nil {
		return err
	}
	if err := syncDir(dataDir); err != nil {
		return err
	}
	return os.RemoveAll(work)
}
