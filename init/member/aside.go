package member

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultKeepRemoved is how many removed-* copies MoveAside keeps in
// state/, the new one included.
const DefaultKeepRemoved = 3

// ErrNoSpace: MoveAside refused to keep a copy of the removed member's
// data: the filesystem lacks the room the member needs to join again.
var ErrNoSpace = errors.New("not enough free space to keep the removed member's data")

// Aside moves a removed member's data into state/. Its fields are seams
// for tests; the zero value is the real thing.
type Aside struct {
	// Keep is how many removed-* copies to keep, the new one included;
	// 0 means DefaultKeepRemoved.
	Keep int
	// Free returns the bytes available to unprivileged users on the
	// filesystem of path; nil means statfs(2).
	Free func(path string) (uint64, error)
	// Now is the time for the copy's name; nil means time.Now.
	Now func() time.Time
}

// MoveAside is Aside{}.Move.
func MoveAside(dataDir, stateDir string) (string, error) { return Aside{}.Move(dataDir, stateDir) }

// Move moves the contents of a removed member's data dir into a new
// directory stateDir/removed-<UTC time> and returns its path. dataDir
// itself stays, empty, so it may be a mount point. Both must be on one
// filesystem (DATA holds etcd/ and state/): a rename takes no room, and a
// rename across filesystems fails and leaves the data where it was. An
// empty or missing dataDir moves nothing and returns "".
//
// The copy stays on DATA while the member joins again and receives about
// as much data from the leader. So Move first checks (statfs) that the
// filesystem has that much free, counting the oldest removed-* copies it
// would prune to keep Keep of them; if not, it fails with ErrNoSpace,
// naming the bytes needed and available, and changes nothing: the data
// stays in dataDir and no copy is pruned. Otherwise it prunes the oldest
// copies beyond Keep (they are all an operator gets of older removals)
// and moves the data.
func (a Aside) Move(dataDir, stateDir string) (string, error) {
	entries, err := os.ReadDir(dataDir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("move aside %s: %w", dataDir, err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("move aside %s: %w", dataDir, err)
	}
	keep, free, now := a.Keep, a.Free, a.Now
	if keep <= 0 {
		keep = DefaultKeepRemoved
	}
	if free == nil {
		free = freeBytes
	}
	if now == nil {
		now = time.Now
	}

	need, err := diskUsage(dataDir)
	if err != nil {
		return "", fmt.Errorf("move aside %s: size: %w", dataDir, err)
	}
	copies, err := removedCopies(stateDir)
	if err != nil {
		return "", fmt.Errorf("move aside %s: %w", dataDir, err)
	}
	var prune []string
	if len(copies) > keep-1 {
		prune = copies[:len(copies)-(keep-1)]
	}
	avail, err := free(stateDir)
	if err != nil {
		return "", fmt.Errorf("move aside %s: free space on %s: %w", dataDir, stateDir, err)
	}
	freed := uint64(0)
	for _, c := range prune {
		n, err := diskUsage(c)
		if err != nil {
			return "", fmt.Errorf("move aside %s: size of %s: %w", dataDir, c, err)
		}
		freed += n
	}
	if avail+freed < need {
		return "", fmt.Errorf("move aside %s: the member joins again with about %d bytes, %d bytes are free on %s (%d more after pruning %d old removed-* copies); the data stays: %w",
			dataDir, need, avail, stateDir, freed, len(prune), ErrNoSpace)
	}
	for _, c := range prune {
		if err := os.RemoveAll(c); err != nil {
			return "", fmt.Errorf("move aside %s: prune %s: %w", dataDir, c, err)
		}
	}

	base := filepath.Join(stateDir, "removed-"+now().UTC().Format("20060102T150405Z"))
	dst := base
	for i := 2; ; i++ {
		err := os.Mkdir(dst, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("move aside %s: %w", dataDir, err)
		}
		dst = base + "-" + strconv.Itoa(i)
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(dataDir, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return dst, fmt.Errorf("move aside %s: %w", dataDir, err)
		}
	}
	for _, d := range []string{dataDir, dst, stateDir} {
		if err := syncDir(d); err != nil {
			return dst, fmt.Errorf("move aside %s: %w", dataDir, err)
		}
	}
	return dst, nil
}

// removedCopies returns stateDir's removed-* directories, oldest first:
// by time, then by the -N suffix of copies made in the same second.
func removedCopies(stateDir string) ([]string, error) {
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		return nil, err
	}
	type copyName struct {
		stamp string
		n     int
		path  string
	}
	var cs []copyName
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "removed-")
		if !ok || !e.IsDir() {
			continue
		}
		stamp, suffix, _ := strings.Cut(rest, "-")
		n := 1
		if suffix != "" {
			if n, err = strconv.Atoi(suffix); err != nil {
				continue // not one of ours
			}
		}
		cs = append(cs, copyName{stamp, n, filepath.Join(stateDir, e.Name())})
	}
	slices.SortFunc(cs, func(a, b copyName) int {
		if c := strings.Compare(a.stamp, b.stamp); c != 0 {
			return c
		}
		return a.n - b.n
	})
	paths := make([]string, len(cs))
	for i, c := range cs {
		paths[i] = c.path
	}
	return paths, nil
}

// diskUsage sums the sizes of the regular files under dir.
func diskUsage(dir string) (uint64, error) {
	var n uint64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += uint64(info.Size())
		}
		return nil
	})
	return n, err
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
