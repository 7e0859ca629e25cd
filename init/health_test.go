package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

func TestHealthAddr(t *testing.T) {
	for _, tc := range []struct{ addr, err string }{
		{"127.0.0.1:9380", ""},
		{"127.0.0.2:9380", ""},
		{"[::1]:9380", ""},
		{"0.0.0.0:9380", "not a loopback address"},
		{"10.0.0.11:9380", "not a loopback address"},
		{"[::]:9380", "not a loopback address"},
		{"localhost:9380", "want a loopback IP address and port"},
		{"127.0.0.1", "want a loopback IP address and port"},
		{"127.0.0.1:0", "want a port"},
	} {
		_, err := loopbackAddr(tc.addr)
		if tc.err == "" {
			assert.NoError(t, err, tc.addr)
			continue
		}
		require.Error(t, err, tc.addr)
		assert.Contains(t, err.Error(), tc.err, tc.addr)
		assert.Contains(t, err.Error(), "--health-addr", "the error names the flag")
	}
}

func TestHealthHandler(t *testing.T) {
	ready := errors.New("etcd is not started yet")
	srv := httptest.NewServer(healthHandler(
		func() (string, error) { return "etcd supervised", nil },
		func(context.Context) (string, error) { return "", ready }))
	defer srv.Close()
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/livez", 200, "ok: etcd supervised\n"},
		{"HEAD", "/livez", 200, ""},
		{"GET", "/readyz", 503, "not ok: etcd is not started yet\n"},
		{"POST", "/readyz", 405, "method not allowed\n"},
		{"DELETE", "/livez", 405, "method not allowed\n"},
		{"GET", "/", 404, "404 page not found\n"},
		{"GET", "/metrics", 404, "404 page not found\n"},
		{"GET", "/v1/status", 404, "404 page not found\n"},
		{"GET", "/livez/x", 404, "404 page not found\n"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		require.NoError(t, err)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, tc.code, resp.StatusCode, "%s %s", tc.method, tc.path)
		assert.Equal(t, tc.body, string(body), "%s %s", tc.method, tc.path)
	}
}

// probe is one GET of an init's health listener.
func probe(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitProbe polls path until it answers code, and returns the body.
func waitProbe(t *testing.T, n *cnode, addr, path string, code int, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	var got int
	var body string
	for time.Now().Before(deadline) {
		if got, body = probe(t, addr, path); got == code {
			return body
		}
		select {
		case <-n.done:
			t.Fatalf("%s exited while waiting for %s %d:\n%s", n.name, path, code, tail(n.log(), 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("%s: %s answered %d %q, not %d, for %s", n.name, path, got, body, code, within)
	return ""
}

// childPid finds the running child of parent named comm, from /proc.
func childPid(t *testing.T, parent int, comm string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open || s[open+1:closing] != comm {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(parent) {
			pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
			return pid
		}
	}
	t.Fatalf("no child %q of %d", comm, parent)
	return 0
}

// TestContainerHealth runs the health listener in real container-mode
// inits with real etcd children: /livez answers while the member waits
// for its peers, /readyz only once etcd serves, and not while etcd is
// frozen or its member has no quorum; a non-loopback address is refused
// at boot.
func TestContainerHealth(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "h1", "h2")
	h1, h2 := c.nodes["h1"], c.nodes["h2"]
	addr := map[*cnode]string{}
	for _, n := range []*cnode{h1, h2} {
		c.writeSeed(n, "health", 2, "h1", "h2")
		addr[n] = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		n.env = []string{"ETCDBOX_HEALTH_ADDR=" + addr[n]}
	}

	h1.start()
	h1.waitLog(0, "health checks on http://"+addr[h1], 30*time.Second)
	body := waitProbe(t, h1, addr[h1], "/livez", 200, 30*time.Second)
	assert.Contains(t, body, "ok: ")
	// h2 has not started: the formation cannot go on without its word,
	// so no etcd runs, and the member is not ready.
	code, body := probe(t, addr[h1], "/readyz")
	assert.Equal(t, 503, code, body)
	assert.Contains(t, body, "etcd is not started yet")
	assert.NotContains(t, h1.log(), "etcd ready")

	h2.start()
	for _, n := range []*cnode{h1, h2} {
		body := waitProbe(t, n, addr[n], "/readyz", 200, 90*time.Second)
		assert.Equal(t, "ok: member "+n.name+" serves linearizable reads\n", body)
	}
	etcd := childPid(t, h1.cmd.Process.Pid, "etcd")
	code, body = probe(t, addr[h1], "/livez")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, fmt.Sprintf("etcd supervised, pid %d ", etcd))
	code, _ = probe(t, addr[h1], "/metrics")
	assert.Equal(t, 404, code, "the listener serves the two checks only")

	t.Run("a frozen etcd is live but not ready", func(t *testing.T) {
		require.NoError(t, syscall.Kill(etcd, syscall.SIGSTOP))
		defer syscall.Kill(etcd, syscall.SIGCONT)
		body := waitProbe(t, h1, addr[h1], "/readyz", 503, 20*time.Second)
		assert.Contains(t, body, "member h1 serves no linearizable read")
		code, body := probe(t, addr[h1], "/livez")
		assert.Equal(t, 200, code, body)
		require.NoError(t, syscall.Kill(etcd, syscall.SIGCONT))
		waitProbe(t, h1, addr[h1], "/readyz", 200, 30*time.Second)
	})

	t.Run("a member without quorum is not ready", func(t *testing.T) {
		// h1's etcd runs, and would serve a serializable read; a frozen
		// h2 takes the quorum of two away, and linearizable reads with it.
		peer := childPid(t, h2.cmd.Process.Pid, "etcd")
		require.NoError(t, syscall.Kill(peer, syscall.SIGSTOP))
		defer syscall.Kill(peer, syscall.SIGCONT)
		body := waitProbe(t, h1, addr[h1], "/readyz", 503, 20*time.Second)
		assert.Contains(t, body, "member h1 serves no linearizable read")
		code, body := probe(t, addr[h1], "/livez")
		assert.Equal(t, 200, code, body)
		assert.Contains(t, body, fmt.Sprintf("etcd supervised, pid %d ", etcd), "h1's etcd still runs")
		require.NoError(t, syscall.Kill(peer, syscall.SIGCONT))
		waitProbe(t, h1, addr[h1], "/readyz", 200, 30*time.Second)
	})

	t.Run("a non-loopback address is refused at boot", func(t *testing.T) {
		h3 := c.add("h3")
		c.writeSeed(h3, "health", 2, "h1", "h2", "h3")
		h3.env = []string{fmt.Sprintf("ETCDBOX_HEALTH_ADDR=0.0.0.0:%d", testenv.FreePort(t))}
		h3.start()
		select {
		case <-h3.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the init went on with a health listener on every address")
		}
		assert.Contains(t, h3.log(), "fatal: serve health checks: --health-addr \"0.0.0.0:")
		assert.Contains(t, h3.log(), "not a loopback address")
	})
}
