package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// ringNode serves its log from a console.Ring, as the init does.
type ringNode struct {
	statusNode
	ring *console.Ring
}

func (n ringNode) Logs(lines int) []string {
	all := n.ring.Lines()
	return all[max(0, len(all)-lines):]
}

func (n ringNode) LogsSince(seq uint64) ([]string, uint64, uint64) { return n.ring.Since(seq, 0) }

// TestLogsFollow follows a node's log through new lines, a node that
// stops answering, and its next boot, whose lines all follow; an
// interrupt ends it cleanly.
func TestLogsFollow(t *testing.T) {
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	ring := console.NewRing(100)
	fmt.Fprint(ring, "old 1\nold 2\nold 3\n")
	srv, addr := serveAt(t, adminDir, "n1", "127.0.0.1:0", ringNode{statusNode{status: nodeapi.Status{Name: "n1"}}, ring})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testenv.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"logs", "n1", "-f", "--lines", "2", "--interval", "20ms", "--timeout", "2s",
			"--endpoints", "https://" + addr, "--pki", adminDir}, &out, &errOut)
	}()
	waitFor := func(what string, buf *testenv.Buffer, want string) {
		t.Helper()
		require.Eventually(t, func() bool { return strings.Contains(buf.String(), want) }, 20*time.Second, 10*time.Millisecond,
			"%s: %q not in\n%s\nstderr:\n%s", what, want, out.String(), errOut.String())
	}
	waitFor("the last two lines", &out, "old 2\nold 3\n")
	fmt.Fprint(ring, "new 4\nnew 5\npartial")
	waitFor("new lines", &out, "old 2\nold 3\nnew 4\nnew 5\n")
	fmt.Fprint(ring, " line 6\n")
	waitFor("a line once it ends", &out, "new 5\npartial line 6\n")

	// The node goes away, then boots again on the same address.
	require.NoError(t, srv.Close())
	waitFor("the node is gone", &errOut, "etcdbox: n1 does not answer")
	ring2 := console.NewRing(100)
	fmt.Fprint(ring2, "boot2 1\nboot2 2\nboot2 3\nboot2 4\nboot2 5\nboot2 6\nboot2 7\n")
	serveAt(t, adminDir, "n1", addr, ringNode{statusNode{status: nodeapi.Status{Name: "n1"}}, ring2})
	waitFor("the new boot", &out, "partial line 6\nboot2 1\nboot2 2\nboot2 3\nboot2 4\nboot2 5\nboot2 6\nboot2 7\n")
	assert.Contains(t, errOut.String(), "etcdbox: n1 booted again; its new log follows")
	assert.Equal(t, 1, strings.Count(errOut.String(), "does not answer"), "said once")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "an interrupt is a clean end")
	case <-time.After(10 * time.Second):
		t.Fatal("logs -f did not end on interrupt")
	}
	assert.Equal(t, 1, strings.Count(out.String(), "old 3\n"), "no line twice")
}
