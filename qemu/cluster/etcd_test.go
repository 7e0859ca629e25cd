package cluster

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu"
)

// etcdMember is one upstream etcd process on loopback with mutual TLS
// from the test's CA, as a node runs it.
type etcdMember struct {
	name               string
	clientURL, peerURL string
}

// startEtcd starts bin/etcd as member m of initialCluster in state
// ("new" or "existing") and stops it when the test ends.
func startEtcd(t *testing.T, pkiDir string, m etcdMember, initialCluster, state string) {
	t.Helper()
	ca, err := pki.LoadCAFiles(pkiDir)
	require.NoError(t, err)
	dns, ips := pki.NodeSANs(m.name, nil, nil)
	cert, key, err := ca.Issue(pki.Leaf{CommonName: m.name, DNSNames: dns, IPs: ips, Server: true, Client: true, Validity: time.Hour})
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	require.NoError(t, os.WriteFile(certFile, cert, 0o600))
	require.NoError(t, os.WriteFile(keyFile, key, 0o600))
	caFile := filepath.Join(pkiDir, pki.CACertFile)
	cmd := exec.Command(testenv.Bin(t, "etcd"),
		"--name", m.name, "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--initial-cluster", initialCluster, "--initial-cluster-state", state, "--initial-cluster-token", "t",
		"--cert-file", certFile, "--key-file", keyFile, "--trusted-ca-file", caFile, "--client-cert-auth",
		"--peer-cert-file", certFile, "--peer-key-file", keyFile, "--peer-trusted-ca-file", caFile, "--peer-client-cert-auth",
		"--log-outputs", filepath.Join(dir, "etcd.log"))
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
			t.Logf("etcd %s log:\n%s", m.name, qemu.Tail(string(b), 20))
		}
	})
}

func newMember(t *testing.T, name string) etcdMember {
	port := func() string {
		p, err := qemu.FreePort("127.0.0.1")
		require.NoError(t, err)
		return strconv.Itoa(p)
	}
	return etcdMember{name: name, clientURL: "https://127.0.0.1:" + port(), peerURL: "https://127.0.0.1:" + port()}
}

// TestProbeAndStatus runs real etcd: a one-member cluster, then a learner
// joining it. probe and askMember must tell voter from learner, the
// leader, and the cluster ID, as wait and Status report them.
func TestProbeAndStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd processes; not in -short")
	}
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	tc, err := nodeapi.AdminTLS(pkiDir)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	n1 := newMember(t, "n1")
	startEtcd(t, pkiDir, n1, "n1="+n1.peerURL, "new")
	var o observation
	require.Eventually(t, func() bool { o = probe(ctx, n1.clientURL, tc); return o.err == nil }, time.Minute, 100*time.Millisecond,
		"n1 does not serve: %v", o.err)
	assert.NotZero(t, o.clusterID)
	assert.NotZero(t, o.memberID)
	assert.True(t, membersDone(o.members, []string{"n1"}, 1), "members: %s", describeMembers(o.members))
	s := askMember(ctx, n1.clientURL, tc)
	assert.Equal(t, MemberStatus{MemberID: o.memberID, Leader: true, Health: "healthy"}, s)

	// n2 joins as a learner, the way a node does.
	n2 := newMember(t, "n2")
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{n1.clientURL}, TLS: tc, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cl.Close()
	added, err := cl.MemberAddAsLearner(ctx, []string{n2.peerURL})
	require.NoError(t, err)
	o = probe(ctx, n1.clientURL, tc)
	require.NoError(t, o.err)
	assert.Equal(t, "?(learner, unstarted: "+n2.peerURL+") n1", describeMembers(o.members))
	i := slices.IndexFunc(o.members, func(m *pb.Member) bool { return m.ID == added.Member.ID })
	require.GreaterOrEqual(t, i, 0)
	assert.True(t, isNode(o.members[i], Node{Name: "n2", IP: netip.MustParseAddr("127.0.0.1")}, ""), "the unstarted learner is n2 by its peer URL")
	startEtcd(t, pkiDir, n2, "n1="+n1.peerURL+",n2="+n2.peerURL, "existing")
	require.Eventually(t, func() bool { s = askMember(ctx, n2.clientURL, tc); return s.Health == "healthy" }, time.Minute, 100*time.Millisecond,
		"learner n2: %s", s.Health)
	assert.Equal(t, MemberStatus{MemberID: added.Member.ID, Learner: true, Health: "healthy"}, s)
	o2 := probe(ctx, n2.clientURL, tc)
	assert.Error(t, o2.err, "a learner serves no linearizable reads")
	o = probe(ctx, n1.clientURL, tc)
	require.NoError(t, o.err)
	assert.False(t, membersDone(o.members, []string{"n1", "n2"}, 2), "a learner is not done: %s", describeMembers(o.members))

	require.Eventually(t, func() bool {
		_, err := cl.MemberPromote(ctx, added.Member.ID)
		return err == nil
	}, time.Minute, 500*time.Millisecond, "promote n2")
	require.Eventually(t, func() bool {
		o = probe(ctx, n2.clientURL, tc)
		return o.err == nil && membersDone(o.members, []string{"n1", "n2"}, 2)
	}, time.Minute, 100*time.Millisecond, "n2 as a voter: %v, members %s", o.err, describeMembers(o.members))
	o1 := probe(ctx, n1.clientURL, tc)
	assert.Equal(t, o1.clusterID, o.clusterID, "one cluster")
	assert.Equal(t, "voter", NodeStatus{MemberStatus: askMember(ctx, n2.clientURL, tc)}.Role())
}
