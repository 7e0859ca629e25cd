package image

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// memberCache keeps the zstd program's frames of initrd members, named
// by the hash of the program's setting and the archive, so that a build
// from the same binaries and modules does not compress them again: the
// program takes 15 s over /init on two cores, the built-in encoder 2 s.
//
// A frame read back is decoded and compared with the archive before it
// is used (checkFrame), so a damaged or foreign file costs a compression,
// never an initrd. Only members without the seed or the image's own
// files are kept (cpioParts): a seed may hold secrets, and it must not
// outlive the build in a cache directory.
type memberCache struct {
	dir string
}

// cacheKeep is how many frames the cache keeps; the least recently used
// go first. /init's frame is 8 MB, the modules' and tools' 3 MB.
const cacheKeep = 12

// cacheExt ends every file the cache writes; prune removes no other.
const cacheExt = ".initrd-member.zst"

// key names the frame of archive compressed by the program with id.
func (c *memberCache) key(id string, archive []byte) string {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write(archive)
	return hex.EncodeToString(h.Sum(nil))
}

func (c *memberCache) path(key string) string { return filepath.Join(c.dir, key+cacheExt) }

// busy holds a lock for each frame this process is making (by its path).
var busy sync.Map

// lock serialises this process's builds of one frame: a second build of
// the same member at once (the raw and OCI forms built side by side, the
// tests' parallel builds) waits for the first and takes its frame from
// the cache, rather than running the program over the same archive on
// the same cores.
func (c *memberCache) lock(key string) (unlock func()) {
	m, _ := busy.LoadOrStore(c.path(key), &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// get returns the kept frame of key when it decodes to archive. A frame
// that does not is removed.
func (c *memberCache) get(key string, archive []byte) ([]byte, bool) {
	p := c.path(key)
	frame, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	if checkFrame(frame, archive) != nil {
		os.Remove(p)
		return nil, false
	}
	now := time.Now()
	os.Chtimes(p, now, now) // recently used: pruned last
	return frame, true
}

// put keeps frame under key, written whole before it is named, and
// prunes the cache to cacheKeep frames.
func (c *memberCache) put(key string, frame []byte) error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("initrd cache: %w", err)
	}
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("initrd cache: %w", err)
	}
	_, err = f.Write(frame)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.path(key))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("initrd cache: %w", err)
	}
	return c.prune()
}

// prune removes the least recently used frames beyond cacheKeep.
func (c *memberCache) prune() error {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("initrd cache: %w", err)
	}
	type kept struct {
		name string
		used time.Time
	}
	var frames []kept
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), cacheExt) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			frames = append(frames, kept{e.Name(), fi.ModTime()})
		}
	}
	if len(frames) <= cacheKeep {
		return nil
	}
	slices.SortFunc(frames, func(a, b kept) int { return b.used.Compare(a.used) })
	for _, f := range frames[cacheKeep:] {
		if err := os.Remove(filepath.Join(c.dir, f.name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("initrd cache: %w", err)
		}
	}
	return nil
}
