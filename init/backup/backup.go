// Package backup keeps a node's etcd snapshots on its DATA partition:
// each a file named for the time it was taken, written whole or not at
// all (temporary name, fsync, rename, fsync of the directory), the newest
// few kept.
//
//	snap, err := backup.Save(backup.Dir("/var/lib/etcdbox"), rc, rev, time.Now(), 3)
//
// Restoring one is never automatic (DESIGN §5): an operator asks for it.
package backup

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// prefix and suffix frame a snapshot's file name; the time stamp between
// them sorts in time order.
const (
	prefix     = "etcd-"
	suffix     = ".db"
	timeLayout = "20060102T150405.000000000Z"
)

// Dir is where a node whose DATA is mounted at root keeps its snapshots.
func Dir(root string) string { return filepath.Join(root, "backups") }

// A Snapshot is one saved etcd snapshot.
type Snapshot struct {
	Path     string
	Size     int64
	Revision int64 // the etcd revision it holds, as its member said
	Taken    time.Time
}

// Save writes r to dir under a time-stamped name (temporary name, fsync,
// rename, fsync of dir), then removes all but the newest keep snapshots.
func Save(dir string, r io.Reader, rev int64, now time.Time, keep int) (Snapshot, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Snapshot{}, err
	}
	path := filepath.Join(dir, prefix+now.UTC().Format(timeLayout)+suffix)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return Snapshot{}, err
	}
	size, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return Snapshot{}, fmt.Errorf("write snapshot %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	if err := Prune(dir, keep); err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Path: path, Size: size, Revision: rev, Taken: now}, nil
}

// Prune removes all but the newest keep snapshots in dir, and the
// temporary files a crash left behind.
func Prune(dir string, keep int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var snaps []string
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix+".tmp"):
			os.Remove(filepath.Join(dir, name))
		case strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix):
			snaps = append(snaps, name)
		}
	}
	slices.Sort(snaps)
	for len(snaps) > keep {
		if err := os.Remove(filepath.Join(dir, snaps[0])); err != nil {
			return fmt.Errorf("remove old snapshot: %w", err)
		}
		snaps = snaps[1:]
	}
	return nil
}
