package main

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIssueCertificates: a node issues its server and peer leaves from
// the seed's node CA, with the chain in the file, and renews them keeping
// their keys.
func TestIssueCertificates(t *testing.T) {
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	s := &seed.Seed{Cluster: "c", Name: "n1", Discovery: seed.Discovery{SRV: "example.internal"}}
	s.PKI, _, err = seed.IssuingPKI(ca, s.NodeScope())
	require.NoError(t, err)
	s.PKI.LeafLifetime = "90s"
	n := &node{
		log:     console.New(),
		options: options{root: t.TempDir()},
		self: self{
			seed:   s,
			name:   "n1",
			domain: "example.internal",
			ips:    []net.IP{net.ParseIP("10.0.0.11")},
		},
	}
	require.NoError(t, n.issueCertificates(t.Context()))
	assert.True(t, n.peerOnly, "node CA leaves: peers only on the peer port")

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	read := func(kind string) (*x509.Certificate, []byte, []byte) {
		b, err := os.ReadFile(filepath.Join(n.pkiDir(), kind+".crt"))
		require.NoError(t, err)
		c, err := pki.ParseCertPEM(b)
		require.NoError(t, err)
		key, err := os.ReadFile(filepath.Join(n.pkiDir(), kind+".key"))
		require.NoError(t, err)
		return c, b, key
	}
	for kind, cn := range map[string]string{"server": "n1", "peer": pki.PeerCommonName} {
		c, certPEM, _ := read(kind)
		assert.Equal(t, cn, c.Subject.CommonName)
		assert.ElementsMatch(t, []string{"n1", "n1.example.internal", "localhost"}, c.DNSNames, kind)
		var ips []string
		for _, ip := range c.IPAddresses {
			ips = append(ips, ip.String())
		}
		assert.ElementsMatch(t, []string{"10.0.0.11", "127.0.0.1", "::1"}, ips, kind)
		pair, err := tls.X509KeyPair(certPEM, mustRead(t, filepath.Join(n.pkiDir(), kind+".key")))
		require.NoError(t, err)
		require.Len(t, pair.Certificate, 2, "the leaf and the node CA")
		inter := x509.NewCertPool()
		nodeCA, err := x509.ParseCertificate(pair.Certificate[1])
		require.NoError(t, err)
		inter.AddCert(nodeCA)
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			_, err := c.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: "n1.example.internal"})
			assert.NoError(t, err, "%s for usage %v", kind, usage)
		}
		fi, err := os.Stat(filepath.Join(n.pkiDir(), kind+".key"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), kind+".key mode")
	}

	before, _, key := read("server")
	require.NoError(t, n.renewDue(time.Now()))
	same, _, _ := read("server")
	assert.Equal(t, before.SerialNumber, same.SerialNumber, "not due yet")
	require.NoError(t, n.renewDue(time.Now().Add(61*time.Second)))
	after, _, keyAfter := read("server")
	assert.NotEqual(t, before.SerialNumber, after.SerialNumber, "renewed at two thirds of 90s")
	assert.Equal(t, key, keyAfter, "the key is kept")
	st, nearest := n.pkiStatus()
	assert.Equal(t, nodeapi.IssuerNodeCA, st.Issuer)
	assert.Empty(t, st.Warnings)
	assert.WithinDuration(t, time.Now().Add(90*time.Second), nearest, 5*time.Second)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
