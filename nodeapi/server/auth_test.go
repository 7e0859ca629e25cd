package server_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

func TestRefusedAtTheTLSLayer(t *testing.T) {
	p := newTestPKI(t)
	node := &fakeNode{}
	endpoint := startServer(t, p, node)
	other, err := pki.NewCA("other-ca", 0)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		url  string
		tls  *tls.Config
	}{
		{"plain HTTP", strings.Replace(endpoint, "https://", "http://", 1), nil},
		{"no client certificate", endpoint, p.clientTLS(t, nil, "")},
		{"admin certificate of another CA", endpoint, p.clientTLS(t, other, pki.AdminCommonName)},
		{"the admin certificate over TLS 1.2", endpoint, tls12(p.clientTLS(t, p.ca, pki.AdminCommonName))},
		// The node CA's name constraints allow no such URI: the chain
		// does not verify.
		{"the admin URI minted by a node", endpoint, p.clientTLSWith(t, p.nodeCA, pki.Leaf{CommonName: "mallory", Client: true, URIs: []*url.URL{adminURI(t)}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, req := range []struct{ method, path, body string }{
				{http.MethodGet, nodeapi.PathStatus, ""},
				{http.MethodPost, nodeapi.PathReboot, ""},
			} {
				r, err := http.NewRequest(req.method, tc.url+req.path, strings.NewReader(req.body))
				require.NoError(t, err)
				resp, err := httpClient(tc.tls).Do(r)
				if tc.tls != nil {
					require.Error(t, err, "%s %s", req.method, req.path)
					continue
				}
				// Go's TLS server answers plain HTTP with a bare 400
				// before any handler runs.
				require.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s answered %s", req.method, req.path, b)
				assert.Contains(t, string(b), "HTTPS server")
			}
			assert.Zero(t, node.callCount(), "a refused client reached the node")
		})
	}
}

// TestNonAdminReadsButCannotAct: a node's leaf reads, and every mutating
// endpoint refuses it; so does a leaf a node mints under the admin's
// name, and a leaf of a seed that carries the root's key.
func TestNonAdminReadsButCannotAct(t *testing.T) {
	p := newTestPKI(t)
	for _, tc := range []struct{ name, cn, who string }{
		{"a node leaf", "n2", "node n2"},
		{"a node's leaf named etcdbox-admin", pki.AdminCommonName, "node etcdbox-admin"},
		{"a leaf of the root named like a node", "n2", "n2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			issuer := p.nodeCA
			if tc.who == "n2" {
				issuer = p.ca
			}
			nonAdminCannotAct(t, p, p.clientTLS(t, issuer, tc.cn), tc.who)
		})
	}
}

func nonAdminCannotAct(t *testing.T, p *testPKI, tlsConfig *tls.Config, who string) {
	node := &fakeNode{status: nodeapi.Status{Name: "n1"}}
	endpoint := startServer(t, p, node)
	c, err := nodeapi.NewClientTLS(endpoint, tlsConfig)
	require.NoError(t, err)
	ctx := t.Context()

	st, err := c.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, "n1", st.Name)
	_, err = c.Upgrade(ctx)
	require.NoError(t, err)
	_, err = c.Logs(ctx, 5)
	require.NoError(t, err)

	for name, call := range map[string]func() error{
		"reboot":       func() error { return c.Reboot(ctx) },
		"upgrade":      func() error { return c.StageUpgrade(ctx, goodRef) },
		"hold":         func() error { return c.HoldUpgrade(ctx, goodRef) },
		"arm":          func() error { _, err := c.ArmUpgrade(ctx, goodRef); return err },
		"snapshot":     func() error { _, err := c.Snapshot(ctx); return err },
		"backups":      func() error { _, err := c.Backups(ctx); return err },
		"backup now":   func() error { _, err := c.Backup(ctx); return err },
		"backup get":   func() error { _, err := c.GetBackup(ctx, "etcd-1.db", io.Discard); return err },
		"decommission": func() error { _, err := c.Decommission(ctx, "n1", ""); return err },
		"without":      func() error { _, err := c.FormWithout(ctx, []string{"n3"}); return err },
		"restore": func() error {
			_, err := c.Restore(ctx, nodeapi.RestoreRequest{Token: "restore-x", Step: nodeapi.RestoreFence})
			return err
		},
		"recover": func() error {
			_, err := c.Recover(ctx, nodeapi.RecoverRequest{Survivor: "n1", Token: nodeapi.RecoveryToken("1", "2")})
			return err
		},
		"rotate CA": func() error {
			_, err := c.RotateCA(ctx, nodeapi.CARotationRequest{Phase: nodeapi.RotationTrust, NewCA: string(p.ca.CertPEM())})
			return err
		},
	} {
		err := call()
		require.Error(t, err, name)
		ae := apiError(t, err)
		assert.Equal(t, http.StatusForbidden, ae.StatusCode, name)
		assert.Contains(t, ae.Message, "needs an admin certificate (issued by the cluster's root CA, etcdbox pki issue-admin); this client is "+who, name)
	}
	_, err = c.CARotation(ctx)
	require.NoError(t, err, "reading the rotation is not acting")
	assert.Zero(t, node.reboots)
	assert.Empty(t, node.staged)
	assert.Empty(t, node.held)
	assert.Empty(t, node.armed)
	assert.Zero(t, node.snapshots)
	assert.Zero(t, node.backedUp)
	assert.Empty(t, node.decommissioned)
	assert.Empty(t, node.formation.Without)
	assert.Empty(t, node.recovers)
	assert.Empty(t, node.rotations)
	assert.Empty(t, node.restores)
}

// tls12 is c capped at TLS 1.2, which the server refuses: it asks for 1.3.
func tls12(c *tls.Config) *tls.Config {
	c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	return c
}

func adminURI(t *testing.T) *url.URL {
	u, err := url.Parse(pki.AdminURI)
	require.NoError(t, err)
	return u
}

// TestAdminByIssuerAndURI: an admin certificate of the root, named as the
// operator likes, acts, and applies a CA rotation phase.
func TestAdminByIssuerAndURI(t *testing.T) {
	p := newTestPKI(t)
	node := &fakeNode{}
	endpoint := startServer(t, p, node)
	certPEM, keyPEM, err := p.ca.IssueAdmin("alice", time.Hour)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	tc := p.clientTLS(t, nil, "")
	tc.Certificates = []tls.Certificate{cert}
	c, err := nodeapi.NewClientTLS(endpoint, tc)
	require.NoError(t, err)
	require.NoError(t, c.Reboot(t.Context()))
	rot, err := c.RotateCA(t.Context(), nodeapi.CARotationRequest{Phase: nodeapi.RotationTrust, NewCA: string(p.ca.CertPEM())})
	require.NoError(t, err)
	assert.Equal(t, nodeapi.RotationTrust, rot.Phase)
	_, err = c.RotateCA(t.Context(), nodeapi.CARotationRequest{Phase: nodeapi.RotationReissue, NewCA: string(p.ca.CertPEM())})
	assert.Equal(t, http.StatusBadRequest, apiError(t, err).StatusCode, "reissue without the node CA")
	assert.Equal(t, 1, node.reboots)
	assert.Len(t, node.rotations, 1)
}
