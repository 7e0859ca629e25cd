package e2e

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/seed"
)

// renewLife is the life of TestSingleNode's leaves: renewed every 20 s.
const renewLife = "30s"

// shortLeavesVolume writes a NoCloud volume holding the shared fixture's
// seed with leaves of renewLife, and returns its path: a cidata seed
// comes before the one baked into the image.
func shortLeavesVolume(t *testing.T, pkiDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(pkiDir, "..", "e2e-seed.yaml"))
	require.NoError(t, err)
	s, err := seed.Parse(b)
	require.NoError(t, err)
	s.PKI.LeafLifetime = renewLife
	data, err := s.Marshal()
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "seed.img")
	require.NoError(t, image.WriteCidata(p, data, []byte("instance-id: e2e-n1\n"), 0))
	return p
}

// renewalWatch is a client of one node while its leaves renew: a
// porcupine writer, and a new TLS handshake every second, noting the
// server certificate each presents.
type renewalWatch struct {
	w       *kvwriter.Writer
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	serials map[string]bool
	failed  []string
}

func watchRenewals(t *testing.T, n *node, pkiDir string) *renewalWatch {
	t.Helper()
	tc := testenv.AdminTLS(t, []string{pkiDir}, pkiDir)
	w, err := kvwriter.Start([]string{n.endpoint()}, tc)
	require.NoError(t, err)
	rw := &renewalWatch{w: w, stop: make(chan struct{}), done: make(chan struct{}), serials: map[string]bool{}}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n.vm.HostPort(clientPort)))
	go func() {
		defer close(rw.done)
		for {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tc)
			rw.mu.Lock()
			if err != nil {
				rw.failed = append(rw.failed, time.Now().Format(time.TimeOnly)+": "+err.Error())
			} else {
				rw.serials[conn.ConnectionState().PeerCertificates[0].SerialNumber.String()] = true
				conn.Close()
			}
			rw.mu.Unlock()
			select {
			case <-rw.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return rw
}

// seen is how many server certificates the handshakes saw.
func (rw *renewalWatch) seen() int {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return len(rw.serials)
}

// testRenewal waits until the node's leaves were renewed three times
// under the client, then checks that no request and no handshake failed,
// the writer's history is linearizable, and etcd never restarted: its
// process start time and its console say so.
func testRenewal(t *testing.T, n *node, pkiDir string, rw *renewalWatch, mark int64, etcdStart string) {
	deadline := time.Now().Add(3 * time.Minute)
	for rw.seen() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	close(rw.stop)
	<-rw.done
	res, err := rw.w.Stop(30 * time.Second)
	require.NoError(t, err)
	// The init logs a renewal after it wrote the files etcd reads the
	// new leaf from, so the console can trail the handshake that showed
	// the leaf: give the line a bounded wait.
	renewals := func() int { return strings.Count(n.vm.Console()[mark:], "etcdbox: pki: leaves renewed") }
	for end := time.Now().Add(30 * time.Second); renewals() < rw.seen()-1 && time.Now().Before(end); {
		time.Sleep(250 * time.Millisecond) // polling interval, bounded by end
	}
	console := n.vm.Console()[mark:]
	t.Logf("leaves of %s: %d server certificates seen, %d renewals logged; writer %d puts, %d failed", renewLife, rw.seen(), strings.Count(console, "etcdbox: pki: leaves renewed"), res.Acked, res.Failed)
	assert.GreaterOrEqual(t, rw.seen(), 4, "the server leaf renewed three times")
	assert.GreaterOrEqual(t, strings.Count(console, "etcdbox: pki: leaves renewed"), 3)
	assert.Empty(t, rw.failed, "a new handshake failed")
	assert.Zero(t, res.Failed, "a request failed: %v", res.Errors)
	assert.Equal(t, porcupine.Ok, res.Check(time.Minute))
	for _, restart := range []string{"etcdbox: etcd exited", "etcdbox: etcd: restarting", "Linux version"} {
		assert.NotContains(t, console, restart, "etcd restarted while its leaves renewed")
	}
	assert.Equal(t, etcdStart, etcdStartTime(t, n, pkiDir), "etcd's process start time changed")
}

// etcdStartTime is etcd's process_start_time_seconds, from its metrics.
func etcdStartTime(t *testing.T, n *node, pkiDir string) string {
	t.Helper()
	return metric(t, testenv.AdminTLS(t, []string{pkiDir}, pkiDir), n.httpEndpoint(), "process_start_time_seconds")
}
