package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/qemu/cluster"
)

// follower is `etcdbox logs -f NODE --dir DIR` running against a node of
// the shared cluster, its output collected.
type follower struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (f *follower) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Write(p)
}

func (f *follower) text() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.String()
}

// followLogs starts logs -f on node; the test's end stops it.
func followLogs(t *testing.T, c *cluster.Cluster, node string) *follower {
	t.Helper()
	f := &follower{done: make(chan error, 1)}
	f.cmd = exec.Command(testenv.Bin(t, "etcdbox"), "logs", "-f", node, "--dir", c.Dir(), "--interval", "250ms")
	var stderr bytes.Buffer
	f.cmd.Stdout, f.cmd.Stderr = f, &stderr
	require.NoError(t, f.cmd.Start())
	go func() { f.done <- f.cmd.Wait() }()
	t.Cleanup(func() {
		if f.cmd.ProcessState == nil {
			_ = f.cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("logs -f %s, standard error:\n%s", node, stderr.String())
		}
	})
	return f
}

// waitFor waits until the followed log has a line containing s.
func (f *follower) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(f.text(), s) {
		select {
		case err := <-f.done:
			require.Failf(t, "logs -f ended", "before a line with %q: %v\n%s", s, err, tail(f.text(), 2000))
		case <-time.After(250 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "logs -f printed no line with %q within a minute:\n%s", s, tail(f.text(), 2000))
	}
}

// stop interrupts logs -f as an operator's Ctrl-C does: it exits 0, and
// printed no line twice in a row (a line printed again after a poll).
func (f *follower) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, f.cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-f.done:
		assert.NoError(t, err, "logs -f after an interrupt")
	case <-time.After(30 * time.Second):
		require.Fail(t, "logs -f did not end within 30 s of an interrupt")
	}
	lines := strings.Split(f.text(), "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" && lines[i] == lines[i-1] {
			assert.Failf(t, "a line printed twice", "%q", lines[i])
		}
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
