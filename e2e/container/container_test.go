package container

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

// ctr is one etcdbox container: its name, ports on the host's network,
// its seed and its data directory (the volume that outlives it).
type ctr struct {
	name, podName             string
	clientPort, peerPort, api int
	httpPort                  int
	seed, data                string
}

func (c *ctr) endpoint() string { return fmt.Sprintf("https://127.0.0.1:%d", c.clientPort) }

// fixture is three containers of one image and one CA.
type fixture struct {
	t      *testing.T
	image  string
	pkiDir string
	nodes  []*ctr
}

// newFixture writes the seeds of n1..n3: static peers on the host's
// loopback, each node on ports of its own (they share the host's
// network, as a static pod with hostNetwork does).
func newFixture(t *testing.T, img string) *fixture {
	f := &fixture{t: t, image: img, pkiDir: filepath.Join(t.TempDir(), "pki")}
	require.NoError(t, pki.Init(f.pkiDir, false))
	run := img[strings.LastIndex(img, ":")+1:]
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		f.nodes = append(f.nodes, &ctr{name: name, podName: "etcdbox-" + run + "-" + name,
			clientPort: testenv.FreePort(t), peerPort: testenv.FreePort(t), api: testenv.FreePort(t),
			httpPort: testenv.FreePort(t), data: t.TempDir()})
	}
	for _, n := range f.nodes {
		s := &seed.Seed{Cluster: "ctest", Name: n.name,
			Etcd: seed.Etcd{ClientPort: n.clientPort, PeerPort: n.peerPort, HTTPPort: n.httpPort}, API: seed.API{Port: n.api}}
		s.Discovery.InitialSize = len(f.nodes)
		for _, p := range f.nodes {
			s.Discovery.Peers = append(s.Discovery.Peers, seed.Peer{Name: p.name, Host: "127.0.0.1", PeerPort: p.peerPort, ClientPort: p.clientPort, APIPort: p.api, HTTPPort: p.httpPort})
		}
		var err error
		s.PKI, _, err = seed.IssuingPKIFrom(f.pkiDir, s.NodeScope())
		require.NoError(t, err)
		data, err := s.Marshal()
		require.NoError(t, err)
		n.seed = filepath.Join(t.TempDir(), "seed.yaml")
		require.NoError(t, os.WriteFile(n.seed, data, 0o600))
	}
	t.Cleanup(f.cleanup)
	return f
}

// run starts n's container, detached. The entrypoint is the image's
// /init with no --container: it is the container's PID 1 and must find
// out by itself that it is in a container. n1 and n2 name their seed
// with --seed; n3 with $ETCDBOX_SEED.
func (f *fixture) run(n *ctr) {
	args := append([]string{"run", "--detach", "--name", n.podName, "--network", "host"}, ulimits(f.t)...)
	args = append(args, "--volume", n.data+":/var/lib/etcdbox", "--volume", n.seed+":/etc/etcdbox/seed.yaml:ro")
	tail := []string{"--listen-ip", "127.0.0.1"}
	if n.name == "n3" {
		args = append(args, "--env", "ETCDBOX_SEED=/etc/etcdbox/seed.yaml")
	} else {
		tail = append(tail, "--seed", "/etc/etcdbox/seed.yaml")
	}
	mustPodman(f.t, append(append(args, f.image), tail...)...)
}

// logs is n's container output: podman logs writes what the container
// wrote to its standard error on its own.
func (f *fixture) logs(n *ctr) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "podman", "logs", n.podName).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman logs %s: %v: %s", n.podName, err, out)
	}
	return string(out)
}

func (f *fixture) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range f.nodes {
		if f.t.Failed() {
			f.t.Logf("log of %s:\n%s", n.name, tailLines(f.logs(n), 40))
		}
		if _, err := podman(ctx, "rm", "--force", "--time", "0", n.podName); err != nil && !strings.Contains(err.Error(), "no such container") {
			f.t.Logf("remove %s: %v", n.podName, err)
		}
	}
}

func tailLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(len(l)-n, 0):], "\n")
}

// adminTLS is the operator's client configuration.
func (f *fixture) adminTLS() *tls.Config {
	admin, err := tls.LoadX509KeyPair(filepath.Join(f.pkiDir, "admin.crt"), filepath.Join(f.pkiDir, "admin.key"))
	require.NoError(f.t, err)
	ca, err := pki.LoadCAFiles(f.pkiDir)
	require.NoError(f.t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{admin}, RootCAs: pool}
}

// client connects to the given nodes' etcd.
func (f *fixture) client(nodes ...*ctr) *clientv3.Client {
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.endpoint())
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: f.adminTLS(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(f.t, err)
	f.t.Cleanup(func() { cli.Close() })
	return cli
}

// waitFor polls cond every 200 ms until it returns "" or the deadline
// passes; its last answer says what was missing.
func waitFor(t *testing.T, within time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		last := cond()
		if last == "" {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: not within %s: %s", what, within, last)
		time.Sleep(200 * time.Millisecond)
	}
}

// serves reports "" once n answers a linearizable read (it is a started
// member that has caught up with the leader), else why not.
func (f *fixture) serves(cli *clientv3.Client, n *ctr) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Get(clientv3.WithRequireLeader(ctx), "ctest/probe"); err != nil {
		return n.name + ": " + err.Error()
	}
	return ""
}

// statusOf is n's own view: its member ID and the leader's.
func (f *fixture) statusOf(cli *clientv3.Client, n *ctr) (id, leader uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, n.endpoint())
	require.NoError(f.t, err, "status of %s", n.name)
	return st.Header.MemberId, st.Leader
}

// checkHistory stops w and checks what its clients saw: porcupine finds
// the history linearizable (no acknowledged write was lost).
func checkHistory(t *testing.T, w *kvwriter.Writer) kvwriter.Result {
	t.Helper()
	res, err := w.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Positive(t, res.Acked, "the writer had no write acknowledged")
	assert.Equal(t, porcupine.Ok, res.Check(3*time.Minute), "the writer's history is not linearizable: an acknowledged write was lost")
	return res
}
