package floorpki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSameSeedSameCA(t *testing.T) {
	seed, err := NewSeed()
	require.NoError(t, err)
	a, err := New(seed)
	require.NoError(t, err)
	parsed, err := ParseSeed(hex.EncodeToString(seed))
	require.NoError(t, err)
	b, err := New(parsed)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a.CertPEM(), b.CertPEM()), "two parties derive different CAs from one seed")

	other, err := NewSeed()
	require.NoError(t, err)
	c, err := New(other)
	require.NoError(t, err)
	assert.False(t, bytes.Equal(a.CertPEM(), c.CertPEM()))
}

func TestLeafChainsToTheOtherPartysCA(t *testing.T) {
	seed, err := NewSeed()
	require.NoError(t, err)
	vm, err := New(seed) // what a floor VM derives
	require.NoError(t, err)
	bench, err := New(seed) // what the bench derives
	require.NoError(t, err)
	certPEM, keyPEM, err := vm.Issue("f1", []net.IP{net.ParseIP("10.88.0.11"), net.ParseIP("127.0.0.1")})
	require.NoError(t, err)
	_, err = tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err, "the leaf and its key pair up")
	blk, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	require.NoError(t, err)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err = leaf.Verify(x509.VerifyOptions{Roots: bench.Pool(), KeyUsages: []x509.ExtKeyUsage{usage}})
		assert.NoError(t, err, "usage %v", usage)
	}
	assert.NoError(t, leaf.VerifyHostname("127.0.0.1"))
	assert.NoError(t, leaf.VerifyHostname("10.88.0.11"))
	assert.Error(t, leaf.VerifyHostname("10.88.0.12"))

	stranger, err := NewSeed()
	require.NoError(t, err)
	sca, err := New(stranger)
	require.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: sca.Pool()})
	assert.Error(t, err, "a leaf of one seed's CA passes another's")
}

func TestBadSeed(t *testing.T) {
	for _, s := range []string{"", "zz", hex.EncodeToString(make([]byte, 31))} {
		_, err := ParseSeed(s)
		assert.ErrorContains(t, err, "want 32 bytes in hexadecimal", "%q", s)
	}
	_, err := New(make([]byte, 5))
	assert.ErrorContains(t, err, "5 bytes, want 32")
}
