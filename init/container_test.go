package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The fast tier of the member lifecycle: real init processes in container
// mode, each with a real etcd child, on loopback. It runs the same code as
// a node in a VM from the seed on.

// initBuild is one build of this package, made once per test binary.
type initBuild struct {
	once sync.Once
	path string
	err  error
}

var initBin, initBinHooks initBuild

// buildInit compiles this package once per test binary.
func buildInit(t *testing.T) string { return initBin.get(t) }

// buildInitHooks compiles it with the test hooks (testhooks.go).
func buildInitHooks(t *testing.T) string { return initBinHooks.get(t, "-tags", "testhooks") }

func (b *initBuild) get(t *testing.T, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "etcdbox-init-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "init")
		args := append(append([]string{"build"}, flags...), "-o", b.path, ".")
		// Through the reaper: once a test started it, exec's own Wait
		// may find its child reaped already.
		out, err := supervise.CombinedOutput(context.Background(), exec.Command("go", args...))
		if err != nil {
			b.err = fmt.Errorf("go build: %v: %s", err, out)
			return
		}
		// The init is also etcd (runetcd.go): the nodes run it under
		// the name etcd, as an image's /usr/bin/etcd does.
		b.err = os.Symlink("init", filepath.Join(dir, "etcd"))
	})
	require.NoError(t, b.err)
	return b.path
}

// cnode is one init process in container mode.
type cnode struct {
	t                    *testing.T
	name                 string
	dir                  string
	clientPort, peerPort int
	apiPort, httpPort    int
	seed                 string
	// tune is the seed's etcd section but for the ports.
	tune seed.Etcd
	// bin is the init to run (default: buildInit's); env is added to
	// its environment.
	bin string
	env []string
	out testenv.Buffer
	cmd *exec.Cmd
	// proc is cmd under the reaper: the test process reaps every child
	// once a test started one through supervise, so exec.Cmd.Wait could
	// find its child already gone.
	proc *supervise.Process
	done chan struct{}
}

func (c *cnode) log() string { return c.out.String() }

func (c *cnode) endpoint() string { return fmt.Sprintf("https://127.0.0.1:%d", c.clientPort) }

// cluster is a set of container-mode nodes sharing a CA.
type cluster struct {
	t      *testing.T
	pkiDir string
	nodes  map[string]*cnode
	backup seed.Backup // the seeds' backup section
	// leafLifetime is the seeds' pki.leafLifetime ("": the default).
	leafLifetime string
}

func newCluster(t *testing.T, names ...string) *cluster {
	if testing.Short() {
		t.Skip("multi-process tier: runs in make test, not in go test -short")
	}
	c := &cluster{t: t, pkiDir: filepath.Join(t.TempDir(), "pki"), nodes: map[string]*cnode{}}
	require.NoError(t, pki.Init(c.pkiDir, false))
	for _, n := range names {
		c.add(n)
	}
	return c
}

func (c *cluster) add(name string) *cnode {
	n := &cnode{t: c.t, name: name, dir: c.t.TempDir(), clientPort: testenv.FreePort(c.t), peerPort: testenv.FreePort(c.t), apiPort: testenv.FreePort(c.t), httpPort: testenv.FreePort(c.t)}
	c.nodes[name] = n
	return n
}

// writeSeed writes n's seed: static peers (the given names, in order),
// initialSize and the cluster name.
func (c *cluster) writeSeed(n *cnode, clusterName string, initial int, peers ...string) {
	e := n.tune
	e.ClientPort, e.PeerPort = n.clientPort, n.peerPort
	if e.HTTPPort == 0 { // the tune may share the client port
		e.HTTPPort = n.httpPort
	}
	s := &seed.Seed{Cluster: clusterName, Name: n.name,
		Etcd:   e,
		API:    seed.API{Port: n.apiPort},
		Backup: c.backup}
	s.Discovery.InitialSize = initial
	for _, p := range peers {
		pn := c.nodes[p]
		s.Discovery.Peers = append(s.Discovery.Peers, seed.Peer{Name: p, Host: "127.0.0.1", PeerPort: pn.peerPort, ClientPort: pn.clientPort, APIPort: pn.apiPort, HTTPPort: cmp.Or(pn.tune.HTTPPort, pn.httpPort)})
	}
	var err error
	s.PKI, _, err = seed.IssuingPKIFrom(c.pkiDir, s.NodeScope())
	require.NoError(c.t, err)
	s.PKI.LeafLifetime = c.leafLifetime
	data, err := s.Marshal()
	require.NoError(c.t, err)
	n.seed = filepath.Join(n.dir, "seed.yaml")
	require.NoError(c.t, os.WriteFile(n.seed, data, 0o600))
}

// start runs n's init process.
func (n *cnode) start() {
	t := n.t
	bin := n.bin
	if bin == "" {
		bin = buildInit(t)
	}
	// The init's own etcd, as in an image; bin/etcd for an init built
	// elsewhere.
	etcd := filepath.Join(filepath.Dir(bin), "etcd")
	if _, err := os.Lstat(etcd); err != nil {
		etcd = testenv.Bin(t, "etcd")
	}
	n.cmd = exec.Command(bin, "--container", "--seed", n.seed, "--data-dir", filepath.Join(n.dir, "data"),
		"--etcd", etcd, "--listen-ip", "127.0.0.1")
	n.cmd.Env = append(os.Environ(), n.env...)
	n.cmd.Stdout, n.cmd.Stderr = &n.out, &n.out
	proc, err := supervise.Start(n.cmd)
	require.NoError(t, err)
	n.proc = proc
	n.done = make(chan struct{})
	go func() { _ = proc.Wait(); close(n.done) }()
	t.Cleanup(func() { n.stop() })
}

// stop sends SIGTERM and waits for init to exit.
func (n *cnode) stop() {
	if n.proc == nil {
		return
	}
	_ = n.proc.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(45 * time.Second):
		_ = n.proc.Signal(syscall.SIGKILL)
		<-n.done
	}
	if n.t.Failed() {
		var own []string
		for _, l := range strings.Split(n.log(), "\n") {
			if strings.HasPrefix(l, "etcdbox: ") {
				own = append(own, l)
			}
		}
		n.t.Logf("init log of %s:\n%s\nlast lines:\n%s", n.name, tail(strings.Join(own, "\n"), 40), tail(n.log(), 10))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// waitLog waits until n's output after offset from holds want.
func (n *cnode) waitLog(from int, want string, within time.Duration) int {
	n.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		log := n.log()
		if i := strings.Index(log[min(from, len(log)):], want); i >= 0 {
			return from + i + len(want)
		}
		select {
		case <-n.done:
			n.t.Fatalf("%s exited while waiting for %q:\n%s", n.name, want, tail(n.log(), 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
	n.t.Fatalf("%s: no %q within %s:\n%s", n.name, want, within, tail(n.log(), 30))
	return 0
}

// client connects with the admin certificate to the given nodes.
func (c *cluster) client(nodes ...*cnode) *clientv3.Client {
	tc := c.adminTLS()
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.endpoint())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(c.t, err)
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// adminTLS is the operator's client configuration.
func (c *cluster) adminTLS() *tls.Config {
	admin, err := tls.LoadX509KeyPair(filepath.Join(c.pkiDir, "admin.crt"), filepath.Join(c.pkiDir, "admin.key"))
	require.NoError(c.t, err)
	ca, err := pki.LoadCAFiles(c.pkiDir)
	require.NoError(c.t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{admin}, RootCAs: pool}
}

// voters waits until the cluster lists want voting, started members.
func (c *cluster) voters(cli *clientv3.Client, want int, within time.Duration) *clientv3.MemberListResponse {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := cli.MemberList(ctx)
		cancel()
		if err == nil {
			voting := 0
			for _, m := range resp.Members {
				if !m.IsLearner && len(m.ClientURLs) > 0 {
					voting++
				}
			}
			if voting == want && len(resp.Members) == want {
				return resp
			}
			last = fmt.Sprintf("%d members, %d voting and started", len(resp.Members), voting)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no %d voting members within %s: %s", want, within, last)
	return nil
}

func TestContainerLifecycle(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1", "n2", "n3", "n4")
	n1, n2, n3, n4 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"], c.nodes["n4"]
	for _, n := range []*cnode{n1, n2, n3} {
		c.writeSeed(n, "fast", 3, "n1", "n2", "n3")
	}

	t.Run("simultaneous first boot forms one cluster", func(t *testing.T) {
		for _, n := range []*cnode{n1, n2, n3} {
			n.start()
		}
		for _, n := range []*cnode{n1, n2, n3} {
			n.waitLog(0, "membership: bootstrap", 30*time.Second)
			n.waitLog(0, "is a voting member", 60*time.Second)
		}
		ids := map[uint64]bool{}
		for _, n := range []*cnode{n1, n2, n3} {
			resp := c.voters(c.client(n), 3, 30*time.Second)
			ids[resp.Header.ClusterId] = true
		}
		assert.Len(t, ids, 1, "one cluster ID across the nodes")
		// A node that formed anew had every peer's word that none ever
		// served, and so did not wait out the member list's deadline.
		formed := 0
		for _, n := range []*cnode{n1, n2, n3} {
			if strings.Contains(n.log(), "never started etcd: bootstrap formation") {
				formed++
				assert.True(t, strings.Contains(n.log(), "membership: no peer has served etcd yet: every peer answered"),
					"%s formed anew after waiting out the member list:\n%s", n.name, grepLines(n.log(), "etcdbox: membership: "))
			}
		}
		assert.Positive(t, formed, "no node formed a new formation")
	})

	t.Run("etcd runs with compaction, a quota sized to DATA, and corruption checks", func(t *testing.T) {
		for _, n := range []*cnode{n1, n2, n3} {
			n.waitLog(0, "compaction periodic, keeping 1h of history; corruption checks on", time.Second)
			n.waitLog(0, `"auto-compaction-mode":"periodic"`, time.Second)
			data, _, err := dataSizes(filepath.Join(n.dir, "data"), filepath.Join(n.dir, "data", "etcd"))
			require.NoError(t, err)
			want, _ := backendQuota(0, data, 0)
			require.Positive(t, want)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			st, err := c.client(n).Status(ctx, n.endpoint())
			cancel()
			require.NoError(t, err)
			assert.Equal(t, want, st.DbSizeQuota, "%s: etcd's quota", n.name)
			// etcd refuses TLS 1.2, even with the admin's certificate.
			tc := c.adminTLS()
			tc.MaxVersion = tls.VersionTLS12
			conn, err := tls.Dial("tcp", strings.TrimPrefix(n.endpoint(), "https://"), tc)
			if err == nil {
				conn.Close()
			}
			assert.ErrorContains(t, err, "protocol version", "%s accepted TLS 1.2", n.name)
		}
	})

	t.Run("a new node joins as a learner and is promoted", func(t *testing.T) {
		c.writeSeed(n4, "fast", 3, "n1", "n2", "n3", "n4")
		n4.start()
		n4.waitLog(0, "membership: join as learner", 30*time.Second)
		n4.waitLog(0, "added as learner", 30*time.Second)
		n4.waitLog(0, "promoted to a voting member", 60*time.Second)
		c.voters(c.client(n1), 4, 30*time.Second)
	})

	t.Run("restart keeps the data", func(t *testing.T) {
		cli := c.client(n1, n3)
		_, err := cli.Put(context.Background(), "k", "v")
		require.NoError(t, err)
		memberID := func() uint64 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := c.client(n2).Status(ctx, n2.endpoint())
			require.NoError(t, err)
			return st.Header.MemberId
		}
		before := memberID()
		n2.stop()
		from := len(n2.log())
		n2.start()
		n2.waitLog(from, "membership: restart", 30*time.Second)
		n2.waitLog(from, "etcd ready", 60*time.Second)
		// A member with data compares its hash with its peers' before it
		// serves (etcd checks only at a restart).
		n2.waitLog(from, "initial corruption checking passed", time.Second)
		get, err := c.client(n2).Get(context.Background(), "k")
		require.NoError(t, err)
		require.Len(t, get.Kvs, 1)
		assert.Equal(t, "v", string(get.Kvs[0].Value))
		// Replication alone would give the key back to a new member: the
		// member is the same one, with its own data.
		assert.Equal(t, fmt.Sprintf("%x", before), fmt.Sprintf("%x", memberID()), "n2 came back as another member")
	})

	t.Run("a removed member moves its data aside and rejoins", func(t *testing.T) {
		cli := c.client(n1)
		resp := c.voters(cli, 4, 30*time.Second)
		var id uint64
		for _, m := range resp.Members {
			if m.Name == "n4" {
				id = m.ID
			}
		}
		require.NotZero(t, id)
		from := len(n4.log())
		// etcd refuses membership changes until its members have been
		// connected for 5 s (n2 just restarted): retry on that answer.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := cli.MemberRemove(context.Background(), id)
			if err == nil {
				break
			}
			require.True(t, errors.Is(err, rpctypes.ErrUnhealthy) && time.Now().Before(deadline), "remove n4: %v", err)
			time.Sleep(250 * time.Millisecond)
		}
		n4.waitLog(from, "was removed from the cluster", 60*time.Second)
		n4.waitLog(from, "moved the removed member's data to", 60*time.Second)
		n4.waitLog(from, "promoted to a voting member", 90*time.Second)
		c.voters(cli, 4, 30*time.Second)
		entries, err := os.ReadDir(filepath.Join(n4.dir, "data", "state"))
		require.NoError(t, err)
		var aside int
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "removed") {
				aside++
			}
		}
		assert.Equal(t, 1, aside, "the old data is kept under state/, not deleted")
	})

	t.Run("a seed naming another cluster never joins", func(t *testing.T) {
		n5 := c.add("n5")
		c.writeSeed(n5, "other", 3, "n1", "n2", "n3", "n5")
		n5.start()
		n5.waitLog(0, `the seed names "other": not joining`, 60*time.Second)
		resp := c.voters(c.client(n1), 4, 10*time.Second)
		for _, m := range resp.Members {
			assert.NotEqual(t, "n5", m.Name)
		}
		_, err := os.Stat(filepath.Join(n5.dir, "data", "etcd", "member"))
		assert.True(t, os.IsNotExist(err), "n5 started no etcd member of its own")
	})

	t.Run("a peer that is not etcd: clear log line, retries with backoff, no cluster", func(t *testing.T) {
		fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "not etcd", http.StatusTeapot)
		}))
		defer fake.Close()
		port := fake.Listener.Addr().(*net.TCPAddr).Port
		bogus := c.add("bogus")
		bogus.clientPort, bogus.peerPort = port, port
		n6 := c.add("n6")
		c.writeSeed(n6, "lonely", 1, "bogus", "n6")
		n6.start()
		first := n6.waitLog(0, "membership: no peer answers: member list from https://127.0.0.1:"+strconv.Itoa(port), 60*time.Second)
		n6.waitLog(first, "not an expected initial member", 30*time.Second)
		at := n6.waitLog(first, "retrying in 1s", 30*time.Second)
		n6.waitLog(at, "retrying in 2s", 30*time.Second)
		assert.NotContains(t, n6.log(), "bootstrapping member", "a node must not form a cluster of its own")
		_, err := os.Stat(filepath.Join(n6.dir, "data", "etcd", "member"))
		assert.True(t, os.IsNotExist(err), "no etcd data was made")
	})
}
