package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
	"github.com/etcdbox/etcdbox/seed"
)

// ports says which of n's ports take a client (testenv.Reach).
func (n *cnode) ports(t *testing.T, tc, peer *tls.Config) map[string]error {
	t.Helper()
	at := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	return testenv.Reach(t, testenv.Ports{Client: at(n.clientPort), API: at(n.apiPort), Peer: at(n.peerPort)}, tc, peer)
}

// seedNodeCA is the node CA of n's seed.
func seedNodeCA(t *testing.T, n *cnode) *pki.CA {
	t.Helper()
	var s *seed.Seed
	editSeed(t, n, func(got *seed.Seed) { s = got })
	ca, err := pki.LoadCA([]byte(s.PKI.NodeCACert), []byte(s.PKI.NodeCAKey))
	require.NoError(t, err)
	return ca
}

// peerLeaf is a client configuration presenting a peer leaf of ca, with
// tc's roots.
func peerLeaf(t *testing.T, ca *pki.CA, tc *tls.Config) *tls.Config {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: pki.PeerCommonName, DNSNames: []string{"localhost"}, Server: true, Client: true, Validity: time.Hour})
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	out := tc.Clone()
	out.Certificates = []tls.Certificate{cert}
	return out
}

// TestContainerCARotation rotates the CA of a 3-node cluster, one of whose
// nodes has an older seed (the root's key, no node CA: it serves, and
// warns), under a continuous writer, through the node API, as etcdbox rotate-ca does: all
// three phases run; the writer sees no failed request and its history is
// linearizable; the old admin certificate works until its node drops the
// old root, the new one from the trust phase on; after the drop the old
// one is refused on every port. Before that, the least-privilege rules:
// TLS 1.2 is refused on every port; the peer port takes peer leaves only;
// a node's own leaf cannot act on another node's API.
func TestContainerCARotation(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1", "n2", "n3")
	nodes := []*cnode{c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]}
	for _, n := range nodes {
		c.writeSeed(n, "rotate", 3, "n1", "n2", "n3")
	}
	// n3's seed is an older one: the root's own key, no node CA.
	rootKey, err := os.ReadFile(filepath.Join(c.pkiDir, pki.CAKeyFile))
	require.NoError(t, err)
	editSeed(t, nodes[2], func(s *seed.Seed) {
		s.PKI.NodeCACert, s.PKI.NodeCAKey, s.PKI.CAKey = "", "", string(rootKey)
	})
	for _, n := range nodes {
		n.start()
	}
	c.voters(c.client(nodes...), 3, 2*time.Minute)
	leastPrivilege(t, c, nodes)
	warnings := func(n *cnode, tc *tls.Config) string {
		api, err := nodeapi.NewClientTLS("https://127.0.0.1:"+strconv.Itoa(n.apiPort), tc)
		require.NoError(t, err)
		defer api.Close()
		st, err := api.Status(t.Context())
		require.NoError(t, err)
		return st.PKI.Issuer + ": " + strings.Join(st.PKI.Warnings, "; ")
	}
	assert.Equal(t, nodeapi.IssuerNodeCA+": ", warnings(nodes[0], c.adminTLS()))
	assert.Contains(t, warnings(nodes[2], c.adminTLS()), nodeapi.IssuerRootKey+": the seed carries the root CA's key (pki.caKey): any node can mint an admin certificate")

	next := filepath.Join(c.pkiDir, "next")
	require.NoError(t, pki.InitNamed(next, "etcdbox-ca-next", false))
	newCA, err := pki.LoadCAFiles(next)
	require.NoError(t, err)
	_, lo, _ := net.ParseCIDR("127.0.0.1/32")
	nodeCA, err := newCA.IssueNodeCA(pki.NodeScope{Names: []string{"n1", "n2", "n3"}, Networks: []*net.IPNet{lo}}, 0)
	require.NoError(t, err)
	nodeCAKey, err := nodeCA.KeyPEM()
	require.NoError(t, err)
	roots := []string{c.pkiDir, next}
	both := testenv.AdminTLS(t, roots, c.pkiDir, next)
	oldAdmin, newAdmin := testenv.AdminTLS(t, roots, c.pkiDir), testenv.AdminTLS(t, roots, next)
	oldPeer := testenv.WithLeaf(t, both, seedNodeCA(t, nodes[0]), pki.PeerCommonName)
	newPeer := testenv.WithLeaf(t, both, nodeCA, pki.PeerCommonName)

	var eps []string
	var rnodes []rollout.Node
	for _, n := range nodes {
		eps = append(eps, n.endpoint())
		api, err := nodeapi.NewClientTLS("https://127.0.0.1:"+strconv.Itoa(n.apiPort), both)
		require.NoError(t, err)
		t.Cleanup(api.Close)
		rnodes = append(rnodes, rollout.Node{API: api, EtcdEndpoint: n.endpoint()})
	}
	w, err := kvwriter.Start(eps, both)
	require.NoError(t, err)
	cli, err := rollout.Dial(eps, both)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })

	phases := map[string]int{}
	r := &rollout.Rotation{
		NewCA: newCA.CertPEM(), NodeCACert: nodeCA.CertPEM(), NodeCAKey: nodeCAKey,
		Nodes: rnodes, Etcd: rollout.NewEtcd(cli, both), By: "test", Poll: 200 * time.Millisecond, Log: t.Logf,
		AfterNode: func(phase, name string) {
			phases[phase]++
			n := c.nodes[name]
			switch {
			case phase == nodeapi.RotationTrust && phases[phase] == len(nodes):
				for _, m := range nodes {
					for port, err := range m.ports(t, newAdmin, newPeer) {
						assert.NoError(t, err, "%s: the new CA's certificates from the trust phase on, %s port", m.name, port)
					}
				}
			case phase == nodeapi.RotationDrop:
				for port, err := range n.ports(t, oldAdmin, oldPeer) {
					assert.Error(t, err, "%s dropped the old root: the old CA's certificates are refused on the %s port", name, port)
				}
				for port, err := range n.ports(t, newAdmin, newPeer) {
					assert.NoError(t, err, "%s: the new CA's certificates, %s port", name, port)
				}
			default:
				for port, err := range n.ports(t, oldAdmin, oldPeer) {
					assert.NoError(t, err, "%s at phase %s: the old CA's certificates still work on the %s port", name, phase, port)
				}
			}
		},
	}
	start := time.Now()
	require.NoError(t, r.Run(t.Context()))
	t.Logf("CA rotation of 3 container nodes: %s", time.Since(start).Round(time.Millisecond))
	for _, p := range nodeapi.RotationPhases {
		assert.Equal(t, len(nodes), phases[p], "phase %s ran on every node", p)
	}

	res, err := w.Stop(30 * time.Second)
	require.NoError(t, err)
	t.Logf("writer: %d acknowledged puts, %d failed requests, longest gap %s, slowest put %s", res.Acked, res.Failed, res.Gap.Round(time.Millisecond), res.Slowest.Round(time.Millisecond))
	assert.Zero(t, res.Failed, "no client request failed during the rotation: %v", res.Errors)
	assert.Positive(t, res.Acked)
	assert.Equal(t, porcupine.Ok, res.Check(time.Minute), "the writer's history is linearizable")

	assert.Contains(t, warnings(nodes[2], both), nodeapi.IssuerNodeCA+": ", "the older seed's node issues from the new node CA now")
	assert.NotContains(t, warnings(nodes[2], both), "any node can mint", "and warns no more about the root's key")
	// Run again: every node is done, nothing changes.
	r.AfterNode = nil
	require.NoError(t, r.Run(t.Context()))
	for i, n := range nodes {
		st, err := rnodes[i].API.(*nodeapi.Client).CARotation(t.Context())
		require.NoError(t, err)
		assert.Equal(t, nodeapi.RotationDrop, st.Phase, n.name)
		assert.Equal(t, "etcdbox-ca-next", st.New, n.name)
	}
}

// leastPrivilege checks, on a running cluster: TLS 1.2 is refused on
// every port; the peer port takes a peer leaf and refuses an admin and a
// node's server leaf; a node's server leaf reads another node's API but
// cannot act on it.
func leastPrivilege(t *testing.T, c *cluster, nodes []*cnode) {
	t.Helper()
	admin := c.adminTLS()
	tls12 := admin.Clone()
	tls12.MaxVersion = tls.VersionTLS12
	n1, n2 := nodes[0], nodes[1]
	for port, err := range n1.ports(t, tls12, tls12) {
		assert.ErrorContains(t, err, "protocol version", "TLS 1.2 on the %s port", port)
	}
	leaf := func(kind string) *tls.Config {
		dir := filepath.Join(n2.dir, "data", "state", "pki")
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, kind+".crt"), filepath.Join(dir, kind+".key"))
		require.NoError(t, err)
		tc := admin.Clone()
		tc.Certificates = []tls.Certificate{cert}
		return tc
	}
	peerAddr := fmt.Sprintf("127.0.0.1:%d", n1.peerPort)
	assert.NoError(t, testenv.Handshake(peerAddr, leaf("peer")), "a peer leaf on the peer port")
	assert.Error(t, testenv.Handshake(peerAddr, admin), "the admin on the peer port")
	assert.Error(t, testenv.Handshake(peerAddr, leaf("server")), "a node's server leaf on the peer port")

	api, err := nodeapi.NewClientTLS("https://127.0.0.1:"+strconv.Itoa(n1.apiPort), leaf("server"))
	require.NoError(t, err)
	defer api.Close()
	_, err = api.Status(t.Context())
	require.NoError(t, err, "a node reads another's status")
	err = api.Reboot(t.Context())
	var ae *nodeapi.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusForbidden, ae.StatusCode)
	assert.Contains(t, ae.Message, "this client is node n2")
}

// TestContainerLeafRenewal: a node whose leaves live 30s renews them
// several times while a client writes and reads: the client sees no
// failed request, every new handshake succeeds, the server presents a new
// certificate after each renewal, and etcd never restarts.
func TestContainerLeafRenewal(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1")
	c.leafLifetime = "30s"
	n1 := c.nodes["n1"]
	c.writeSeed(n1, "renew", 1, "n1")
	n1.start()
	c.voters(c.client(n1), 1, 2*time.Minute)
	w, err := kvwriter.Start([]string{n1.endpoint()}, c.adminTLS())
	require.NoError(t, err)

	serials := map[string]bool{}
	deadline := time.Now().Add(95 * time.Second)
	for len(serials) < 4 && time.Now().Before(deadline) {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n1.clientPort), c.adminTLS())
		require.NoError(t, err, "a new handshake at %s", time.Now().Format(time.TimeOnly))
		serials[conn.ConnectionState().PeerCertificates[0].SerialNumber.String()] = true
		conn.Close()
		time.Sleep(time.Second)
	}
	res, err := w.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(serials), 4, "the server leaf renewed at least 3 times")
	assert.Zero(t, res.Failed, "no request failed across the renewals: %v", res.Errors)
	assert.Equal(t, porcupine.Ok, res.Check(time.Minute))
	assert.GreaterOrEqual(t, countLines(n1.log(), "pki: leaves renewed"), 3)
	assert.Zero(t, countLines(n1.log(), "etcd exited")+countLines(n1.log(), "etcd: restarting"), "etcd never restarted")
}

func countLines(log, want string) int { return strings.Count(log, want) }
