package member

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// MoveAside moves the contents of a removed member's data dir into a new
// directory stateDir/removed-<UTC time> and returns its path. It never
// deletes anything: an operator may still want that data. dataDir itself
// stays, empty, so it may be a mount point. Both must be on one filesystem
// (DATA holds etcd/ and state/); a rename across filesystems fails and
// leaves the data where it was. An empty or missing dataDir moves nothing
// and returns "".
func MoveAside(dataDir, stateDir string) (string, error) {
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
	base := filepath.Join(stateDir, "removed-"+time.Now().UTC().Format("20060102T150405Z"))
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

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// RemovedMessage is what etcd logs when the cluster has removed its
// member: the member stops (and etcd exits 0), and restarting it on the
// same data gives the same message.
const RemovedMessage = "the member has been permanently removed from the cluster"

// RemovedWatch is an io.Writer to tee etcd's log through; it notices
// RemovedMessage, even split across writes.
type RemovedWatch struct {
	mu   sync.Mutex
	tail []byte
	once sync.Once
	done chan struct{}
}

// NewRemovedWatch returns a watch for one etcd run.
func NewRemovedWatch() *RemovedWatch { return &RemovedWatch{done: make(chan struct{})} }

// Write scans p; it never fails.
func (w *RemovedWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	buf := append(w.tail, p...)
	if bytes.Contains(buf, []byte(RemovedMessage)) {
		w.once.Do(func() { close(w.done) })
	}
	keep := min(len(buf), len(RemovedMessage)-1)
	w.tail = append(w.tail[:0:0], buf[len(buf)-keep:]...)
	return len(p), nil
}

// Removed is closed once etcd has said that its member was removed.
func (w *RemovedWatch) Removed() <-chan struct{} { return w.done }

// Seen reports whether etcd has said that its member was removed.
func (w *RemovedWatch) Seen() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
