package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/internal/etcdhttp"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// This file runs real upstream etcd processes (bin/etcd) on 127.0.0.1 for
// the fast tier: mutual TLS with leaves from package pki, as on a node;
// ports from the kernel; timings shortened so that elections take
// milliseconds.

// testCluster is the shared material of one test's etcd nodes.
type testCluster struct {
	t     *testing.T
	dir   string
	etcd  string
	token string
	ca    *pki.CA
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("runs etcd processes; not in -short")
	}
	ca, err := pki.NewCA("member-test-ca", time.Hour)
	require.NoError(t, err)
	return &testCluster{t: t, dir: t.TempDir(), etcd: testenv.Bin(t, "etcd"), token: "demo", ca: ca}
}

// node is one etcd member's files, ports and process.
type node struct {
	c                         *testCluster
	name                      string
	dataDir, stateDir, pkiDir string
	clientPort, peerPort      int
	tls                       *tls.Config
	// store is the node's formation record, which it answers the
	// handshake from (answer), as the init's node API does.
	store *Store

	mu    sync.Mutex
	token string // the formation token etcd bootstraps with; "" means the cluster's
	// cancelLoop ends the member loop boot started, if any.
	cancelLoop context.CancelFunc
	proc       *supervise.Process
	log        *testenv.Buffer
	watch      *RemovedWatch
	clients    []*clientv3.Client // connected to this node; closed by stop
	// formed is set when n started a new cluster: waitReady then also
	// waits for the cluster version, without which a member that joins
	// exits at once ("incompatible with current running cluster").
	formed bool
}

func (c *testCluster) node(name string) *node {
	t := c.t
	t.Helper()
	root := filepath.Join(c.dir, name)
	n := &node{
		c: c, name: name,
		dataDir: filepath.Join(root, "etcd"), stateDir: filepath.Join(root, "state"), pkiDir: filepath.Join(root, "pki"),
		clientPort: testenv.FreePort(t), peerPort: testenv.FreePort(t),
	}
	n.store = NewStore(n.stateDir)
	require.NoError(t, os.MkdirAll(n.pkiDir, 0o700))
	cert, key, err := c.ca.Issue(pki.Leaf{
		CommonName: name, DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Server: true, Client: true, Validity: time.Hour,
	})
	require.NoError(t, err)
	for f, data := range map[string][]byte{"ca.crt": c.ca.CertPEM(), "node.crt": cert, "node.key": key} {
		require.NoError(t, os.WriteFile(filepath.Join(n.pkiDir, f), data, 0o600))
	}
	pair, err := tls.X509KeyPair(cert, key)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	n.tls = &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	t.Cleanup(func() {
		n.kill()
		if t.Failed() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.log != nil {
				t.Logf("etcd %s log (tail):\n%s", name, tail(n.log.String(), 40))
			}
		}
	})
	return n
}

func (n *node) PeerURL() string   { return "https://127.0.0.1:" + strconv.Itoa(n.peerPort) }
func (n *node) ClientURL() string { return "https://127.0.0.1:" + strconv.Itoa(n.clientPort) }

// initialCluster is --initial-cluster for bootstrapping nodes.
func initialCluster(nodes ...*node) string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.name + "=" + n.PeerURL()
	}
	return strings.Join(s, ",")
}

// hasData is the init's test for a member in the data dir.
func (n *node) hasData() bool {
	_, err := os.Stat(filepath.Join(n.dataDir, "member", "wal"))
	return err == nil
}

// start runs etcd for n with TLS everywhere, as the init does, and fast
// raft timings.
func (n *node) start(initial, state string) {
	n.c.t.Helper()
	require.NoError(n.c.t, n.startE(initial, state))
}

// startE is start for goroutines other than the test's.
func (n *node) startE(initial, state string) error {
	p := func(f string) string { return filepath.Join(n.pkiDir, f) }
	cmd := exec.Command(n.c.etcd,
		"--name="+n.name,
		"--data-dir="+n.dataDir,
		"--listen-client-urls="+n.ClientURL(),
		"--advertise-client-urls="+n.ClientURL(),
		"--listen-peer-urls="+n.PeerURL(),
		"--initial-advertise-peer-urls="+n.PeerURL(),
		"--initial-cluster="+initial,
		"--initial-cluster-state="+state,
		"--initial-cluster-token="+n.bootToken(),
		"--client-cert-auth", "--trusted-ca-file="+p("ca.crt"), "--cert-file="+p("node.crt"), "--key-file="+p("node.key"),
		"--peer-client-cert-auth", "--peer-trusted-ca-file="+p("ca.crt"), "--peer-cert-file="+p("node.crt"), "--peer-key-file="+p("node.key"),
		"--heartbeat-interval=25", "--election-timeout=250",
		"--unsafe-no-fsync",
		"--logger=zap", "--log-outputs=stderr",
	)
	// The tests' etcd die with the test binary, even when it times out.
	cmd.SysProcAttr = testenv.DieWithTest()
	log, watch := &testenv.Buffer{}, NewRemovedWatch()
	cmd.Stdout = log
	cmd.Stderr = io.MultiWriter(log, watch)
	proc, err := supervise.Start(cmd)
	if err != nil {
		return fmt.Errorf("start etcd %s: %w", n.name, err)
	}
	n.mu.Lock()
	n.proc, n.log, n.watch, n.formed = proc, log, watch, state == "new"
	n.mu.Unlock()
	return nil
}

// bootToken is the --initial-cluster-token n starts with.
func (n *node) bootToken() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.token != "" {
		return n.token
	}
	return n.c.token
}

// answer is n's reply to the formation handshake, as the init's node API
// gives it.
func (n *node) answer() Answer {
	r, err := n.store.Load()
	if err != nil {
		return Answer{Name: n.name, Err: err}
	}
	_, err = os.Stat(filepath.Join(n.stateDir, "member"))
	return Answer{Name: n.name, Formation: nodeapi.Formation{
		Name: n.name, Cluster: n.c.token, HasData: n.hasData(), WasMember: err == nil,
		Nonce: r.Nonce, Started: r.Started(), Token: r.Token, Nonces: r.Nonces, Without: r.Without,
	}}
}

// stop ends etcd with SIGTERM (SIGKILL after 10s) and waits for it. It
// closes the test's clients of n first: etcd's graceful stop waits up to
// its request timeout (5.5s) for open client connections.
func (n *node) stop() {
	n.mu.Lock()
	if n.cancelLoop != nil {
		n.cancelLoop()
		n.cancelLoop = nil
	}
	n.mu.Unlock()
	n.stopEtcd()
}

// stopEtcd is stop without ending the member loop, as the loop itself
// stops a removed member.
func (n *node) stopEtcd() {
	n.mu.Lock()
	p, clients := n.proc, n.clients
	n.clients = nil
	n.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
	if p == nil {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
	}
	_ = p.Wait()
}

func (n *node) kill() {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p != nil {
		_ = p.Signal(syscall.SIGKILL)
		<-p.Done()
		_ = p.Wait()
	}
}

// client connects to the given nodes with n's certificate, as the init
// connects to its peers. It does not wait for a connection.
func (n *node) client(to ...*node) *clientv3.Client {
	t := n.c.t
	t.Helper()
	cli, err := n.dial(to...)
	require.NoError(t, err)
	return cli
}

// dial is client for goroutines other than the test's; the client is
// closed when the test ends.
func (n *node) dial(to ...*node) (*clientv3.Client, error) {
	var eps []string
	for _, m := range to {
		eps = append(eps, m.ClientURL())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: n.tls, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	n.c.t.Cleanup(func() { _ = cli.Close() })
	for _, m := range to {
		m.mu.Lock()
		m.clients = append(m.clients, cli)
		m.mu.Unlock()
	}
	return cli, nil
}

// listening reports whether n's client port accepts connections.
func (n *node) listening() bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(n.clientPort), time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// waitReady waits until n serves a read, failing the test when etcd
// exits or ctx ends first.
func (n *node) waitReady(ctx context.Context) {
	n.c.t.Helper()
	require.NoError(n.c.t, n.waitReadyE(ctx))
}

// waitReadyE polls n's own endpoint until it serves a (serializable, so
// learners too) read.
func (n *node) waitReadyE(ctx context.Context) error {
	cli, err := n.dial(n)
	if err != nil {
		return err
	}
	defer cli.Close()
	n.mu.Lock()
	p, formed := n.proc, n.formed
	n.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// First the port: a client that found it closed backs off for a
	// second before it dials again.
	for !n.listening() {
		select {
		case <-p.Done():
			return fmt.Errorf("etcd %s exited (%s) before it listened", n.name, p.Status())
		case <-ctx.Done():
			return fmt.Errorf("etcd %s not listening: %w", n.name, ctx.Err())
		case <-tick.C:
		}
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.Get(rctx, "ready", clientv3.WithSerializable())
		cancel()
		if err == nil && formed {
			err = n.clusterVersionDecided(ctx)
		}
		if err == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("etcd %s exited (%s) before it was ready", n.name, p.Status())
		case <-ctx.Done():
			return fmt.Errorf("etcd %s not ready: %w", n.name, err)
		case <-tick.C:
		}
	}
}

// clusterVersionDecided asks n's /version whether the cluster's version
// is decided yet (etcd publishes it through raft after the first leader).
func (n *node) clusterVersionDecided(ctx context.Context) error {
	_, err := etcdhttp.ClusterVersion(ctx, n.tls, n.ClientURL())
	return err
}

// status is n's own Status.
func (n *node) status(ctx context.Context) *clientv3.StatusResponse {
	t := n.c.t
	t.Helper()
	cli := n.client(n)
	st, err := cli.Status(ctx, n.ClientURL())
	require.NoError(t, err, "status of %s", n.name)
	return st
}

// observeTimeout bounds one Observe: a peer that does not run waits
// for the whole of it (the etcd client waits for a connection).
const observeTimeout = time.Second

// facts gathers n's Facts as the init does: its data dir, etcd's word on
// removal, and Observe through the other nodes.
func (n *node) facts(ctx context.Context, expected []string, peers ...*node) Facts {
	_, err := os.Stat(filepath.Join(n.stateDir, "member"))
	was := err == nil
	rec, err := n.store.Load()
	if err != nil {
		n.c.t.Errorf("formation record of %s: %v", n.name, err)
	}
	f := Facts{
		Self: n.name, SelfPeerURL: n.PeerURL(), Cluster: n.c.token,
		HasData: n.hasData(), WasMember: was, ExpectedInitial: expected,
		Formation: rec,
	}
	for _, p := range peers {
		f.Answers = append(f.Answers, p.answer())
	}
	n.mu.Lock()
	if n.watch != nil {
		f.RemovedFromCluster = n.watch.Seen()
	}
	n.mu.Unlock()
	if len(peers) == 0 {
		return f
	}
	cli, err := n.dial(peers...)
	if err != nil {
		return f
	}
	defer cli.Close()
	octx, cancel := context.WithTimeout(ctx, observeTimeout)
	defer cancel()
	if obs, err := Observe(octx, cli); err == nil {
		f.Reachable, f.Members, f.PeerCluster = true, obs.Members, obs.Cluster
	}
	return f
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logger collects Logf lines for assertions and the test log.
type logger struct {
	t     *testing.T
	name  string
	mu    sync.Mutex
	lines []string
	at    []time.Time
	ch    chan string
}

func newLogger(t *testing.T, name string) *logger {
	return &logger{t: t, name: name, ch: make(chan string, 100)}
}

func (l *logger) Logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	l.t.Logf("%s: %s", l.name, s)
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.at = append(l.at, time.Now())
	l.mu.Unlock()
	select {
	case l.ch <- s:
	default:
	}
}

func (l *logger) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitFor waits until a line containing substr is logged, failing the
// test when ctx ends first.
func (l *logger) waitFor(ctx context.Context, substr string) {
	l.t.Helper()
	for {
		select {
		case line := <-l.ch:
			if strings.Contains(line, substr) {
				return
			}
		case <-ctx.Done():
			l.t.Fatalf("%s never logged %q", l.name, substr)
		}
	}
}
