package pki

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chainOf verifies a leaf file (leaf, then its CA's certificate) against
// root, for usage, and returns the verified chains.
func chainOf(t *testing.T, root *CA, certPEM []byte, usage x509.ExtKeyUsage) ([][]*x509.Certificate, error) {
	t.Helper()
	var certs []*x509.Certificate
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		certs = append(certs, c)
	}
	require.NotEmpty(t, certs)
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root.Cert)
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	return certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
}

func testScope() NodeScope {
	_, n, _ := net.ParseCIDR("10.88.0.0/24")
	return NodeScope{Domains: []string{"etcdbox.test"}, Names: []string{"n1"}, Networks: []*net.IPNet{n}}
}

// TestNodeCA: a node CA signs node leaves that verify against the root,
// with the names and addresses outside its scope left out, and nothing a
// server or client checking the chain would take as an admin.
func TestNodeCA(t *testing.T) {
	root := newTestCA(t)
	nodeCA, err := root.IssueNodeCA(testScope(), 0)
	require.NoError(t, err)
	assert.False(t, nodeCA.IsRoot())
	assert.True(t, root.IsRoot())
	assert.Equal(t, NodeCACommonName, nodeCA.Cert.Subject.CommonName)
	assert.True(t, nodeCA.Cert.MaxPathLenZero, "a node CA signs leaves only")

	dns, ips := NodeSANs("n1", []string{"etcdbox.test", "evil.example"}, []net.IP{net.ParseIP("10.88.0.11"), net.ParseIP("192.0.2.1")})
	certPEM, _, err := nodeCA.Issue(Leaf{CommonName: "n1", DNSNames: dns, IPs: ips, Server: true, Client: true, Validity: time.Hour})
	require.NoError(t, err)
	leaf, err := ParseCertPEM(certPEM)
	require.NoError(t, err)
	assert.Equal(t, []string{"n1", "n1.etcdbox.test", "localhost"}, leaf.DNSNames, "n1.evil.example is outside the scope")
	var got []string
	for _, ip := range leaf.IPAddresses {
		got = append(got, ip.String())
	}
	assert.Equal(t, []string{"10.88.0.11", "127.0.0.1", "::1"}, got, "192.0.2.1 is outside the scope")

	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		chains, err := chainOf(t, root, certPEM, usage)
		require.NoError(t, err, "the leaf file carries its chain")
		require.Len(t, chains[0], 3)
		assert.False(t, IsAdmin(chains))
		assert.Equal(t, "node n1", Identity(chains))
	}
}

// TestNodeCannotMintAdmin: whatever a node signs with its node CA, no
// server takes it as an admin: the admin URI breaks the chain (the node
// CA's name constraints), and the admin's common name below a node CA is
// a node's.
func TestNodeCannotMintAdmin(t *testing.T) {
	root := newTestCA(t)
	nodeCA, err := root.IssueNodeCA(testScope(), 0)
	require.NoError(t, err)
	u, err := url.Parse(AdminURI)
	require.NoError(t, err)

	withURI, _, err := nodeCA.Issue(Leaf{CommonName: AdminCommonName, Client: true, URIs: []*url.URL{u}})
	require.NoError(t, err)
	_, err = chainOf(t, root, withURI, x509.ExtKeyUsageClientAuth)
	var constraint x509.CertificateInvalidError
	require.ErrorAs(t, err, &constraint, "a node CA cannot sign the admin URI")
	assert.Equal(t, x509.CANotAuthorizedForThisName, constraint.Reason)

	byName, _, err := nodeCA.Issue(Leaf{CommonName: AdminCommonName, Client: true})
	require.NoError(t, err)
	chains, err := chainOf(t, root, byName, x509.ExtKeyUsageClientAuth)
	require.NoError(t, err)
	assert.False(t, IsAdmin(chains), "the admin's name below a node CA is not an admin")

	// A name outside the scope, forced past Issue's filter, is refused too.
	outside := &x509.Certificate{
		SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "x"},
		DNSNames:  []string{"apiserver.evil.example"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	key, err := newKey()
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, outside, nodeCA.Cert, key.Public(), nodeCA.key)
	require.NoError(t, err)
	_, err = chainOf(t, root, append(encodeCert(der), nodeCA.CertPEM()...), x509.ExtKeyUsageServerAuth)
	require.ErrorAs(t, err, &constraint)
	assert.Equal(t, x509.CANotAuthorizedForThisName, constraint.Reason)
}

// TestIssueAdmin: the root's admin certificate is an admin's, and so is
// one made before the admin URI (by common name); a node CA issues none.
func TestIssueAdmin(t *testing.T) {
	root := newTestCA(t)
	certPEM, _, err := root.IssueAdmin("alice", time.Hour)
	require.NoError(t, err)
	chains, err := chainOf(t, root, certPEM, x509.ExtKeyUsageClientAuth)
	require.NoError(t, err)
	assert.True(t, IsAdmin(chains))
	assert.Equal(t, "admin alice", Identity(chains))
	_, err = chainOf(t, root, certPEM, x509.ExtKeyUsageServerAuth)
	assert.Error(t, err, "client use only")

	old, _, err := root.Issue(Leaf{CommonName: AdminCommonName, Client: true})
	require.NoError(t, err)
	chains, err = chainOf(t, root, old, x509.ExtKeyUsageClientAuth)
	require.NoError(t, err)
	assert.True(t, IsAdmin(chains), "an admin certificate from before the URI")

	leaf, _, err := root.Issue(Leaf{CommonName: "n1", DNSNames: []string{"n1"}, Server: true, Client: true})
	require.NoError(t, err)
	chains, err = chainOf(t, root, leaf, x509.ExtKeyUsageClientAuth)
	require.NoError(t, err)
	assert.False(t, IsAdmin(chains), "a node leaf of a root CA")

	nodeCA, err := root.IssueNodeCA(testScope(), 0)
	require.NoError(t, err)
	_, _, err = nodeCA.IssueAdmin("mallory", time.Hour)
	assert.ErrorContains(t, err, "only the root CA issues admin certificates")
}

// TestLegacyRootSignsNoNodeCA: a root made with path length 0 (before node
// CAs) is refused with what to do.
func TestLegacyRootSignsNoNodeCA(t *testing.T) {
	root := newTestCA(t)
	tmpl := *root.Cert
	tmpl.MaxPathLen, tmpl.MaxPathLenZero = 0, true
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, root.key.Public(), root.key)
	require.NoError(t, err)
	keyPEM, err := root.KeyPEM()
	require.NoError(t, err)
	legacy, err := LoadCA(encodeCert(der), keyPEM)
	require.NoError(t, err)
	_, err = legacy.IssueNodeCA(testScope(), 0)
	assert.ErrorContains(t, err, "may sign leaves only")
	assert.ErrorContains(t, err, "etcdbox pki rotate-ca")
}

// TestRenewKeepsKey: a leaf issued with a given key carries it, so that a
// renewal swaps the certificate file alone.
func TestRenewKeepsKey(t *testing.T) {
	root := newTestCA(t)
	_, keyPEM, err := root.Issue(Leaf{CommonName: "n1", DNSNames: []string{"n1"}, Server: true})
	require.NoError(t, err)
	key, err := ParseKeyPEM(keyPEM)
	require.NoError(t, err)
	certPEM, keyPEM2, err := root.Issue(Leaf{CommonName: "n1", DNSNames: []string{"n1"}, Server: true, Key: key})
	require.NoError(t, err)
	assert.Equal(t, string(keyPEM), string(keyPEM2))
	cert, err := ParseCertPEM(certPEM)
	require.NoError(t, err)
	assert.NoError(t, KeyMatches(cert, key))
}

// TestPromoteNext: after a rotation, the next CA is the directory's, the
// old one is kept in previous/.
func TestPromoteNext(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Init(dir, false))
	require.NoError(t, InitNamed(filepath.Join(dir, NextDir), "etcdbox-ca-next", false))
	require.NoError(t, PromoteNext(dir))
	ca, err := LoadCAFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, "etcdbox-ca-next", ca.Cert.Subject.CommonName)
	prev, err := LoadCAFiles(filepath.Join(dir, PreviousDir))
	require.NoError(t, err)
	assert.Equal(t, CACommonName, prev.Cert.Subject.CommonName)
	assert.NoDirExists(t, filepath.Join(dir, NextDir))
	require.NoError(t, PromoteNext(dir), "done already: nothing changes")
	again, err := LoadCAFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, ca.Cert.Raw, again.Cert.Raw)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, PreviousDir)))
	assert.ErrorContains(t, PromoteNext(dir), NextDir, "nothing to promote")
}
