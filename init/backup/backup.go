// Package backup keeps a node's etcd snapshots on its DATA partition:
// each a file named for the time it was taken, written whole or not at
// all (temporary name, fsync, rename, fsync of the directory), the newest
// few kept.
//
//	snap, err := backup.Save(backup.Dir("/var/lib/etcdbox"), rc, "n1", time.Now(), 6)
//	snaps, err := backup.List(backup.Dir("/var/lib/etcdbox"))
//
// Restoring one is never automatic (DESIGN §5): an operator asks for it.
package backup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

// A Snapshot is one saved etcd snapshot, verified before it was kept.
type Snapshot struct {
	Name  string    `json:"name"` // its file name in the backups directory
	Path  string    `json:"-"`
	Size  int64     `json:"size"`
	Taken time.Time `json:"taken"`
	// Member is the name of the member it was taken from.
	Member string `json:"member,omitempty"`
	// Pushed is its reference by digest in the seed's registry, when it
	// was pushed (not recorded: set by the push that follows Save).
	Pushed string `json:"-"`
	Stats
}

// Save writes r, an etcd snapshot stream of the member named member, to
// dir under a time-stamped name: to a temporary name, fsync, Verify, then
// its record (name.json) and a rename into place, and an fsync of dir.
// A snapshot that fails verification is removed and never kept. Then it
// removes all but the newest keep snapshots.
func Save(dir string, r io.Reader, member string, now time.Time, keep int) (Snapshot, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Snapshot{}, err
	}
	name := prefix + now.UTC().Format(timeLayout) + suffix
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	snap := Snapshot{Name: name, Path: path, Taken: now.UTC(), Member: member}
	err := writeSynced(tmp, r, &snap.Size)
	if err == nil {
		snap.Stats, err = Verify(tmp)
	}
	if err == nil {
		var rec []byte
		if rec, err = json.Marshal(snap); err == nil {
			err = writeSynced(path+".json", bytes.NewReader(rec), nil)
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		os.Remove(path + ".json")
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", path, err)
	}
	syncDir(dir)
	if err := Prune(dir, keep); err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}

// writeSynced writes r to path (created or truncated) and flushes it,
// counting the bytes into n when n is not nil.
func writeSynced(path string, r io.Reader, n *int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	size, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if n != nil {
		*n = size
	}
	return err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// List returns the kept snapshots in dir, oldest first, with what their
// records say; none when dir does not exist.
func List(dir string) ([]Snapshot, error) {
	names, err := snapshots(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []Snapshot
	for _, name := range names {
		path := filepath.Join(dir, name)
		snap := Snapshot{Name: name, Path: path}
		if b, err := os.ReadFile(path + ".json"); err == nil {
			_ = json.Unmarshal(b, &snap)
		}
		snap.Name, snap.Path = name, path
		if fi, err := os.Stat(path); err == nil {
			snap.Size = fi.Size()
		}
		if snap.Taken.IsZero() {
			snap.Taken, _ = time.Parse(timeLayout, strings.TrimSuffix(strings.TrimPrefix(name, prefix), suffix))
		}
		out = append(out, snap)
	}
	return out, nil
}

// Open opens the kept snapshot called name in dir; name must be one List
// returns, never a path.
func Open(dir, name string) (*os.File, Snapshot, error) {
	if !validName(name) {
		return nil, Snapshot{}, fmt.Errorf("snapshot %q: %w", name, fs.ErrNotExist)
	}
	snaps, err := List(dir)
	if err != nil {
		return nil, Snapshot{}, err
	}
	for _, s := range snaps {
		if s.Name == name {
			f, err := os.Open(s.Path)
			return f, s, err
		}
	}
	return nil, Snapshot{}, fmt.Errorf("snapshot %q: %w", name, fs.ErrNotExist)
}

// validName says whether name is a snapshot's file name: no path.
func validName(name string) bool {
	return strings.HasPrefix(name, prefix) && strings.HasSuffix(name, suffix) && filepath.Base(name) == name && !strings.ContainsAny(name, "/\\")
}

// snapshots lists the snapshot file names in dir, oldest first.
func snapshots(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var snaps []string
	for _, e := range ents {
		if name := e.Name(); validName(name) {
			snaps = append(snaps, name)
		}
	}
	slices.Sort(snaps)
	return snaps, nil
}

// Prune removes all but the newest keep snapshots in dir with their
// records, and what a crash left behind: temporary files, and records
// without a snapshot.
func Prune(dir string, keep int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	snaps, err := snapshots(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		orphan := strings.HasSuffix(name, suffix+".json") && !slices.Contains(snaps, strings.TrimSuffix(name, ".json"))
		if strings.HasPrefix(name, prefix) && (strings.HasSuffix(name, suffix+".tmp") || orphan) {
			os.Remove(filepath.Join(dir, name))
		}
	}
	for len(snaps) > keep {
		p := filepath.Join(dir, snaps[0])
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("remove old snapshot: %w", err)
		}
		os.Remove(p + ".json")
		snaps = snaps[1:]
	}
	return nil
}
