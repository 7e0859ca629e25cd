package power

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestWatch feeds events through a FIFO standing in for /dev/input/event0.
func TestWatch(t *testing.T) {
	sys := fakeSysfs(t, map[string][2]string{"event0": {"Power Button", "10000000000000 0"}})
	dev := t.TempDir()
	node := filepath.Join(dev, "event0")
	require.NoError(t, unix.Mkfifo(node, 0o600))
	// O_RDWR does not block on a FIFO without a reader, so Watch's open
	// does not block either.
	w, err := os.OpenFile(node, os.O_RDWR, 0)
	require.NoError(t, err)
	defer w.Close()

	var mu sync.Mutex
	var logs []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &PowerButton{SysClass: sys, Dev: dev, Log: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, f)
	}}
	presses, err := b.Watch(ctx)
	require.NoError(t, err)

	// What counts as a press is TestParseEvent's job; this checks the
	// plumbing from device node to channel.
	_, err = w.Write(append(event(1, 116, 1), event(0, 0, 0)...))
	require.NoError(t, err)
	select {
	case <-presses:
	case <-time.After(10 * time.Second):
		t.Fatal("no press reported")
	}
	mu.Lock()
	assert.Equal(t, []string{"power button: watching %s"}, logs)
	mu.Unlock()
}
