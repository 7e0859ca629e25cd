// Package etcdtest runs small clusters of the upstream etcd binary
// (bin/etcd, from make build) on loopback for tests: mutual TLS with
// leaves from a test CA, as on a node, ports from the kernel, and short
// raft timings so that elections take milliseconds.
//
//	c := etcdtest.Start(t, pkiDir, "n1", "n2", "n3") // pkiDir as pki.Init writes it
//	cli := c.Client(t)                              // with the admin certificate
//	c.Kill("n3")                                    // a member down
package etcdtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// Member is one etcd process of a Cluster.
type Member struct {
	Name               string
	ClientURL, PeerURL string
	dir                string
	cmd                *exec.Cmd
	done               chan struct{}
}

// Cluster is a set of etcd members formed together.
type Cluster struct {
	PKIDir  string
	Members []*Member
	tls     *tls.Config
}

// Start forms a cluster of the named members, with leaves issued by the
// CA in pkiDir (ca.crt, ca.key, admin.crt, admin.key), and waits until
// every member serves a linearizable read. The members are killed when
// the test ends. It skips in -short.
func Start(t *testing.T, pkiDir string, names ...string) *Cluster {
	t.Helper()
	return StartArgs(t, pkiDir, nil, names...)
}

// StartArgs is Start with more etcd flags for every member, e.g.
// --quota-backend-bytes.
func StartArgs(t *testing.T, pkiDir string, args []string, names ...string) *Cluster {
	t.Helper()
	return StartWith(t, pkiDir, Options{Args: args}, names...)
}

// Options are StartWith's.
type Options struct {
	// Args are more etcd flags for every member.
	Args []string
	// UID runs the named members as that user (and group), so that a
	// test can tell their packets from the others' with iptables' owner
	// match, all members being on 127.0.0.1: every socket a process opens
	// carries its user. Their files live in a directory of their own
	// under the system's temporary directory, owned by that user.
	UID map[string]uint32
}

// StartWith is Start with Options.
func StartWith(t *testing.T, pkiDir string, o Options, names ...string) *Cluster {
	t.Helper()
	args := o.Args
	if testing.Short() {
		t.Skip("runs etcd processes; not in -short")
	}
	bin := testenv.Bin(t, "etcd")
	ca, err := pki.LoadCAFiles(pkiDir)
	require.NoError(t, err)
	tc, err := nodeapi.AdminTLS(pkiDir)
	require.NoError(t, err)
	c := &Cluster{PKIDir: pkiDir, tls: tc}
	var initial []string
	for _, name := range names {
		m := &Member{Name: name, dir: memberDir(t, name, o.UID), done: make(chan struct{})}
		m.ClientURL = "https://127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		m.PeerURL = "https://127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		c.Members = append(c.Members, m)
		initial = append(initial, name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		dns, ips := pki.NodeSANs(m.Name, nil, nil)
		cert, key, err := ca.Issue(pki.Leaf{CommonName: m.Name, DNSNames: dns, IPs: ips, Server: true, Client: true, Validity: time.Hour})
		require.NoError(t, err)
		f := func(n string) string { return filepath.Join(m.dir, n) }
		require.NoError(t, os.WriteFile(f("node.crt"), cert, 0o600))
		require.NoError(t, os.WriteFile(f("node.key"), key, 0o600))
		caFile := filepath.Join(pkiDir, pki.CACertFile)
		uid, other := o.UID[m.Name]
		if other {
			// Its own copy of the CA, since pkiDir is the test's.
			b, err := os.ReadFile(caFile)
			require.NoError(t, err)
			caFile = f(pki.CACertFile)
			require.NoError(t, os.WriteFile(caFile, b, 0o644))
			for _, p := range []string{m.dir, f("node.crt"), f("node.key"), caFile} {
				require.NoError(t, os.Chown(p, int(uid), int(uid)))
			}
		}
		m.cmd = exec.Command(bin, append([]string{
			"--name", m.Name, "--data-dir", f("data"),
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new", "--initial-cluster-token", "etcdtest",
			"--cert-file", f("node.crt"), "--key-file", f("node.key"), "--trusted-ca-file", caFile, "--client-cert-auth",
			"--peer-cert-file", f("node.crt"), "--peer-key-file", f("node.key"), "--peer-trusted-ca-file", caFile, "--peer-client-cert-auth",
			"--heartbeat-interval=25", "--election-timeout=250", "--unsafe-no-fsync",
			"--log-outputs", f("etcd.log")}, args...)...)
		// The etcd processes die with the test binary, even on a timeout.
		m.cmd.SysProcAttr = testenv.DieWithTest()
		if other {
			m.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid}
		}
		require.NoError(t, m.cmd.Start())
		go func() { m.cmd.Wait(); close(m.done) }()
		t.Cleanup(func() {
			c.Kill(m.Name)
			if t.Failed() {
				b, _ := os.ReadFile(f("etcd.log"))
				t.Logf("etcd %s log (tail):\n%s", m.Name, tail(string(b), 15))
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, m := range c.Members {
		require.NoError(t, c.waitReady(ctx, m), "etcd %s", m.Name)
	}
	return c
}

// memberDir is a new directory for the member called name: the test's
// own, or, for a member that runs as another user (uid), one under the
// system's temporary directory, which that user can reach (the test's
// directories are its own).
func memberDir(t *testing.T, name string, uid map[string]uint32) string {
	t.Helper()
	if _, ok := uid[name]; !ok {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("", "etcdtest-"+name+"-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// waitReady polls m until it serves a linearizable read.
func (c *Cluster) waitReady(ctx context.Context, m *Member) error {
	cli, err := c.dial(m.ClientURL)
	if err != nil {
		return err
	}
	defer cli.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(rctx, "etcdtest/ready")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-m.done:
			return fmt.Errorf("exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w", err)
		case <-tick.C:
		}
	}
}

// TLS is the admin's client configuration.
func (c *Cluster) TLS() *tls.Config { return c.tls.Clone() }

// Endpoints are the client URLs of the members.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Member returns the member called name, failing the test when none is.
func (c *Cluster) Member(t *testing.T, name string) *Member {
	t.Helper()
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("etcdtest: no member %s", name)
	return nil
}

func (c *Cluster) dial(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: c.TLS(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// Client connects to endpoints (default: every member) with the admin
// certificate; it is closed when the test ends.
func (c *Cluster) Client(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cli, err := c.dial(endpoints...)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Pid is the member's process id.
func (m *Member) Pid() int { return m.cmd.Process.Pid }

// Exited reports whether the member's process has exited (and was
// reaped).
func (m *Member) Exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Done is closed once the member's process has exited (and was reaped).
func (m *Member) Done() <-chan struct{} { return m.done }

// DataDir is the member's --data-dir.
func (m *Member) DataDir() string { return filepath.Join(m.dir, "data") }

// Kill ends the member's process with SIGKILL and waits for it.
func (c *Cluster) Kill(name string) {
	for _, m := range c.Members {
		if m.Name == name && m.cmd.Process != nil {
			m.cmd.Process.Signal(syscall.SIGKILL)
			<-m.done
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
