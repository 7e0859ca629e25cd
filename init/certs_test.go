package main

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIssueCertificates(t *testing.T) {
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	issuing, err := seed.IssuingPKI(ca)
	require.NoError(t, err)
	n := &node{
		log:     console.New(),
		options: options{root: t.TempDir()},
		self: self{
			seed:   &seed.Seed{Cluster: "c", PKI: issuing},
			name:   "n1",
			domain: "example.internal",
			ips:    []net.IP{net.ParseIP("10.0.0.11")},
		},
	}
	require.NoError(t, n.issueCertificates(t.Context()))

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, kind := range []string{"server", "peer"} {
		b, err := os.ReadFile(filepath.Join(n.pkiDir(), kind+".crt"))
		require.NoError(t, err)
		c, err := pki.ParseCertPEM(b)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"n1", "n1.example.internal", "localhost"}, c.DNSNames, kind)
		var ips []string
		for _, ip := range c.IPAddresses {
			ips = append(ips, ip.String())
		}
		assert.ElementsMatch(t, []string{"10.0.0.11", "127.0.0.1", "::1"}, ips, kind)
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			_, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: "n1.example.internal"})
			assert.NoError(t, err, "%s for usage %v", kind, usage)
		}
		fi, err := os.Stat(filepath.Join(n.pkiDir(), kind+".key"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), kind+".key mode")
	}
}
