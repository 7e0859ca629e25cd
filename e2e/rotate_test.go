package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

// peerPort is etcd's peer port in the guest; TestCluster forwards it, so
// that the host can knock on it with a certificate.
const peerPort = 2380

// testRotateCA rotates the shared cluster's CA with the rotation roll
// (etcdbox rotate-ca's, DESIGN §6) under the writer: all three phases run
// on every node, the writer sees no failed request and its history is
// linearizable; the old CA's certificates work on every port until a node
// drops the old root and are refused there after; the new CA's work from
// the trust phase on. In the middle of the reissue phase the power of
// the second node reissued is cut: it boots again in that phase, from its
// record on DATA, and the rotation goes on. The writer stops for the cut
// (a dead node fails the requests it was serving, whatever the
// rotation) and starts again once the node is back. Then the pki
// directory's new CA is promoted and the seed volume made anew, as an
// operator does for the nodes that boot from it later.
func testRotateCA(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(ctx, 3*faultDeadline)
	defer cancel()
	pkiDir := c.PKIDir()
	next := filepath.Join(pkiDir, pki.NextDir)
	require.NoError(t, pki.InitNamed(next, "etcdbox-ca-"+time.Now().UTC().Format("20060102-150405"), false))
	oldCA, err := pki.LoadCAFiles(pkiDir)
	require.NoError(t, err)
	newCA, err := pki.LoadCAFiles(next)
	require.NoError(t, err)
	nodeCA, err := newCA.IssueNodeCA(pki.NodeScope{Domains: []string{c.Domain()}}, 0)
	require.NoError(t, err)
	nodeCAKey, err := nodeCA.KeyPEM()
	require.NoError(t, err)
	roots := []string{pkiDir, next}
	both := testenv.AdminTLS(t, roots, pkiDir, next)
	oldAdmin, newAdmin := testenv.AdminTLS(t, roots, pkiDir), testenv.AdminTLS(t, roots, next)
	// The host reaches a guest's peer port through the network's
	// forwarder, from the gateway's address.
	gw, _, err := net.SplitHostPort(cluster.GuestRegistry())
	require.NoError(t, err)
	oldPeer := testenv.WithLeaf(t, both, oldCA, pki.PeerCommonName, net.ParseIP(gw))
	newPeer := testenv.WithLeaf(t, both, nodeCA, pki.PeerCommonName, net.ParseIP(gw))
	reach := func(n cluster.Node, admin, peer *tls.Config) map[string]error {
		at := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
		return testenv.Reach(t, testenv.Ports{Client: at(n.ClientPort), API: at(n.APIPort), Peer: at(n.Ports[peerPort])}, admin, peer)
	}

	var nodes []rollout.Node
	for _, n := range c.Nodes() {
		api, err := nodeapi.NewClientTLS("https://127.0.0.1:"+strconv.Itoa(n.APIPort), both)
		require.NoError(t, err)
		t.Cleanup(api.Close)
		nodes = append(nodes, rollout.Node{API: api, EtcdEndpoint: n.Endpoint()})
	}
	cli, err := rollout.Dial(c.Endpoints(), both)
	require.NoError(t, err)
	defer cli.Close()
	w, err := kvwriter.Start(c.Endpoints(), both)
	require.NoError(t, err)
	var writes []kvwriter.Result
	stop := func() {
		res, err := w.Stop(30 * time.Second)
		require.NoError(t, err)
		writes = append(writes, res)
	}

	phases := map[string]int{}
	r := &rollout.Rotation{
		NewCA: newCA.CertPEM(), NodeCACert: nodeCA.CertPEM(), NodeCAKey: nodeCAKey,
		Nodes: nodes, Etcd: rollout.NewEtcd(cli, both), By: "e2e",
		ReadyWait: faultDeadline, Log: t.Logf,
		AfterNode: func(phase, name string) {
			phases[phase]++
			n, _ := c.Node(name)
			switch {
			case phase == nodeapi.RotationReissue && phases[phase] == 2:
				stop()
				powerCutMidReissue(ctx, t, c, name, nodeCA)
				w, err = kvwriter.Start(c.Endpoints(), both)
				require.NoError(t, err)
			case phase == nodeapi.RotationTrust && phases[phase] == len(nodes):
				for _, m := range c.Nodes() {
					for port, err := range reach(m, newAdmin, newPeer) {
						assert.NoError(t, err, "%s: the new CA's certificates from the trust phase on, %s port", m.Name, port)
					}
				}
			case phase == nodeapi.RotationDrop:
				for port, err := range reach(n, oldAdmin, oldPeer) {
					assert.Error(t, err, "%s dropped the old root: the old CA's certificates are refused on its %s port", name, port)
				}
			default:
				for port, err := range reach(n, oldAdmin, oldPeer) {
					assert.NoError(t, err, "%s at phase %s: the old CA's certificates work on its %s port", name, phase, port)
				}
			}
		},
	}
	start := time.Now()
	require.NoError(t, r.Run(ctx))
	t.Logf("CA rotation of 3 nodes, a power cut included: %s", time.Since(start).Round(time.Second))
	stop()
	for i, res := range writes {
		t.Logf("writer %d: %d acknowledged puts, %d failed requests, longest gap %s", i+1, res.Acked, res.Failed, res.Gap.Round(time.Millisecond))
		assert.Zero(t, res.Failed, "writer %d: no request failed: %v", i+1, res.Errors)
		assert.Positive(t, res.Acked)
		assert.Equal(t, porcupine.Ok, res.Check(3*time.Minute), "writer %d: linearizable", i+1)
	}
	for _, p := range nodeapi.RotationPhases {
		assert.Equal(t, len(nodes), phases[p], "phase %s on every node", p)
	}
	for _, n := range c.Nodes() {
		for port, err := range reach(n, oldAdmin, oldPeer) {
			assert.Error(t, err, "%s: the old CA's certificates refused on the %s port after the rotation", n.Name, port)
		}
		for port, err := range reach(n, newAdmin, newPeer) {
			assert.NoError(t, err, "%s: the new CA's certificates on the %s port", n.Name, port)
		}
	}
	require.NoError(t, pki.PromoteNext(pkiDir))
	require.NoError(t, c.Reseed())
	checkOneCluster(ctx, t, c, []string{"n1", "n2", "n3"})
}

// powerCutMidReissue cuts name's power once its phase reissue is in
// effect, starts it again, and checks that it came back in that phase,
// its leaves from the new node CA.
func powerCutMidReissue(ctx context.Context, t *testing.T, c *cluster.Cluster, name string, nodeCA *pki.CA) {
	t.Helper()
	require.NoError(t, c.Kill(ctx, name))
	// It comes back with its seed on an OpenStack config drive (a vfat
	// volume labelled config-2) instead of the NoCloud volume.
	require.NoError(t, c.SetSeedSource(name, cluster.SourceConfigDrive))
	require.NoError(t, c.Start(ctx, name))
	require.NoError(t, c.WaitReady(ctx, name))
	checkSeedFrom(t, c, name, "OpenStack config drive", "")
	n, _ := c.Node(name)
	// Its node API serves a leaf of the new node CA now: the client
	// trusts both roots, as an operator's tools do during a rotation.
	tc, err := nodeapi.RotationTLS(c.PKIDir(), filepath.Join(c.PKIDir(), pki.NextDir))
	require.NoError(t, err)
	api, err := nodeapi.NewClientTLS("https://127.0.0.1:"+strconv.Itoa(n.APIPort), tc)
	require.NoError(t, err)
	defer api.Close()
	st, err := api.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, nodeapi.RotationReissue, st.PKI.Rotation.Phase, "%s resumed its phase from DATA", name)
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(n.ClientPort)), testenv.AdminTLS(t, []string{c.PKIDir(), filepath.Join(c.PKIDir(), pki.NextDir)}, c.PKIDir()))
	require.NoError(t, err)
	defer conn.Close()
	chain := conn.ConnectionState().PeerCertificates
	require.Len(t, chain, 2)
	assert.Equal(t, nodeCA.Cert.SubjectKeyId, chain[0].AuthorityKeyId, "%s serves a leaf of the new node CA after its power cut", name)
	t.Logf("%s: power cut in the reissue phase; back in it, leaves from the new node CA", name)
}
