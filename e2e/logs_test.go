package e2e

import (
	"bytes"
	"context"
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
// what it printed is the node's own log, every line once and in order (a
// line printed again after a poll, or one skipped, breaks the run).
// Two equal lines in a row are no fault in themselves: etcd's gRPC logger
// stamps whole seconds, and logs the same warning twice in one.
func (f *follower) stop(t *testing.T, c *cluster.Cluster, node string) {
	t.Helper()
	require.NoError(t, f.cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-f.done:
		assert.NoError(t, err, "logs -f after an interrupt")
	case <-time.After(30 * time.Second):
		require.Fail(t, "logs -f did not end within 30 s of an interrupt")
	}
	n, ok := c.Node(node)
	require.True(t, ok, "%s is a node of the cluster", node)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	page, err := nodeAPI(t, c, n).LogsAfter(ctx, 0, 0) // all the node keeps
	require.NoError(t, err, "the log of %s", node)
	followed := strings.Split(strings.TrimSuffix(f.text(), "\n"), "\n")
	require.NotEmpty(t, followed)
	// The node keeps its last lines in a ring; what it logged since the
	// follow ended is a few lines, so the followed run's last half of
	// that ring is still in it.
	keep := min(len(followed), len(page.Lines)/2)
	run := followed[len(followed)-keep:]
	whole := "\n" + strings.Join(page.Lines, "\n") + "\n"
	assert.True(t, strings.Contains(whole, "\n"+strings.Join(run, "\n")+"\n"),
		"the last %d lines logs -f printed are not a run of the %d lines %s keeps: a line printed twice, or one missed; followed:\n%s",
		keep, len(page.Lines), node, tail(f.text(), 4000))
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
