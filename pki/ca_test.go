package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// verify checks certPEM against the CA in caPEM for one extended key usage.
func verify(t *testing.T, caPEM, certPEM []byte, usage x509.ExtKeyUsage) error {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM), "CA PEM")
	cert, err := ParseCertPEM(certPEM)
	require.NoError(t, err)
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA("test-ca", 0)
	require.NoError(t, err)
	return ca
}

func TestNewCA(t *testing.T) {
	before := time.Now()
	ca := newTestCA(t)
	c := ca.Cert

	assert.Equal(t, "test-ca", c.Subject.CommonName)
	assert.True(t, c.IsCA)
	assert.True(t, c.BasicConstraintsValid)
	assert.Equal(t, 1, c.MaxPathLen, "a root signs one level of CA: the node CA")
	assert.False(t, c.MaxPathLenZero)
	assert.Equal(t, x509.KeyUsageCertSign|x509.KeyUsageCRLSign, c.KeyUsage)
	assert.NotEmpty(t, c.SubjectKeyId)
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	require.True(t, ok, "public key is %T, want ECDSA", c.PublicKey)
	assert.Equal(t, elliptic.P256(), pub.Curve)
	assert.Positive(t, c.SerialNumber.Sign())
	assert.LessOrEqual(t, c.SerialNumber.BitLen(), 128)
	assert.WithinDuration(t, before.Add(-ClockSkew), c.NotBefore, 5*time.Second)
	assert.WithinDuration(t, before.Add(DefaultCAValidity), c.NotAfter, 5*time.Second)
	// Self-signed.
	assert.NoError(t, c.CheckSignatureFrom(c))

	other := newTestCA(t)
	assert.NotEqual(t, c.SerialNumber, other.Cert.SerialNumber, "serials must be random")
}

func TestNewCAErrors(t *testing.T) {
	_, err := NewCA("", 0)
	assert.ErrorContains(t, err, "empty common name")
	_, err = NewCA("x", -time.Hour)
	assert.ErrorContains(t, err, "negative validity")
}

func TestIssue(t *testing.T) {
	ca := newTestCA(t)
	dns, ips := NodeSANs("n1", []string{"example.internal"}, []net.IP{net.ParseIP("10.0.0.11")})
	tests := []struct {
		name           string
		leaf           Leaf
		server, client bool // verifies for ServerAuth, ClientAuth
	}{
		{name: "peer", leaf: Leaf{CommonName: "n1", DNSNames: dns, IPs: ips, Server: true, Client: true}, server: true, client: true},
		{name: "server only", leaf: Leaf{CommonName: "n1", DNSNames: dns, Server: true}, server: true},
		{name: "client only", leaf: Leaf{CommonName: "admin", Client: true}, client: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			certPEM, keyPEM, err := ca.Issue(tt.leaf)
			require.NoError(t, err)
			cert, err := ParseCertPEM(certPEM)
			require.NoError(t, err)
			key, err := ParseKeyPEM(keyPEM)
			require.NoError(t, err)

			assert.NoError(t, KeyMatches(cert, key))
			assert.Equal(t, elliptic.P256(), key.Public().(*ecdsa.PublicKey).Curve)
			assert.Equal(t, tt.leaf.CommonName, cert.Subject.CommonName)
			assert.False(t, cert.IsCA)
			assert.True(t, cert.BasicConstraintsValid)
			assert.Equal(t, x509.KeyUsageDigitalSignature, cert.KeyUsage)
			assert.Equal(t, tt.leaf.DNSNames, cert.DNSNames)
			assert.Equal(t, len(tt.leaf.IPs), len(cert.IPAddresses))
			assert.Equal(t, ca.Cert.SubjectKeyId, cert.AuthorityKeyId)
			assert.LessOrEqual(t, cert.SerialNumber.BitLen(), 128)
			assert.WithinDuration(t, before.Add(-ClockSkew), cert.NotBefore, 5*time.Second)
			assert.WithinDuration(t, before.Add(DefaultLeafValidity), cert.NotAfter, 5*time.Second)

			err = verify(t, ca.CertPEM(), certPEM, x509.ExtKeyUsageServerAuth)
			assert.Equal(t, tt.server, err == nil, "verify for server auth: %v", err)
			err = verify(t, ca.CertPEM(), certPEM, x509.ExtKeyUsageClientAuth)
			assert.Equal(t, tt.client, err == nil, "verify for client auth: %v", err)
		})
	}
}

func TestIssueHostname(t *testing.T) {
	ca := newTestCA(t)
	dns, ips := NodeSANs("n1", []string{"example.internal"}, []net.IP{net.ParseIP("10.0.0.11")})
	certPEM, _, err := ca.Issue(Leaf{CommonName: "n1", DNSNames: dns, IPs: ips, Server: true, Client: true})
	require.NoError(t, err)
	cert, err := ParseCertPEM(certPEM)
	require.NoError(t, err)
	for _, host := range []string{"n1", "n1.example.internal", "localhost", "10.0.0.11", "127.0.0.1", "::1"} {
		assert.NoError(t, cert.VerifyHostname(host), "VerifyHostname(%q)", host)
	}
	for _, host := range []string{"n2", "n1.example.com", "10.0.0.12"} {
		assert.Error(t, cert.VerifyHostname(host), "VerifyHostname(%q)", host)
	}
}

func TestIssueErrors(t *testing.T) {
	ca := newTestCA(t)
	tests := []struct {
		name string
		leaf Leaf
		want string
	}{
		{name: "no common name", leaf: Leaf{Client: true}, want: "empty common name"},
		{name: "no usage", leaf: Leaf{CommonName: "x"}, want: `"x": neither server nor client usage`},
		{name: "server without SANs", leaf: Leaf{CommonName: "x", Server: true}, want: "without DNS names or IPs"},
		{name: "negative validity", leaf: Leaf{CommonName: "x", Client: true, Validity: -time.Second}, want: "negative validity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ca.Issue(tt.leaf)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestIssueValidity(t *testing.T) {
	ca, err := NewCA("short", 24*time.Hour)
	require.NoError(t, err)

	certPEM, _, err := ca.Issue(Leaf{CommonName: "a", Client: true, Validity: time.Hour})
	require.NoError(t, err)
	exp, err := Expiry(certPEM)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), exp, 5*time.Second)

	// The default 90 days is cut to the CA's 24 hours.
	certPEM, _, err = ca.Issue(Leaf{CommonName: "b", Client: true})
	require.NoError(t, err)
	exp, err = Expiry(certPEM)
	require.NoError(t, err)
	assert.Equal(t, ca.Cert.NotAfter, exp)
}

func TestOtherCAFails(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	certPEM, _, err := other.Issue(Leaf{CommonName: "intruder", Client: true})
	require.NoError(t, err)
	err = verify(t, ca.CertPEM(), certPEM, x509.ExtKeyUsageClientAuth)
	var unknown x509.UnknownAuthorityError
	assert.ErrorAs(t, err, &unknown)
}

func TestLeafCannotSign(t *testing.T) {
	// MaxPathLen 0 and CA:FALSE on leaves: a leaf used as an intermediate
	// must not verify.
	ca := newTestCA(t)
	leafPEM, leafKeyPEM, err := ca.Issue(Leaf{CommonName: "leaf", Client: true})
	require.NoError(t, err)
	leaf, err := ParseCertPEM(leafPEM)
	require.NoError(t, err)
	leafKey, err := ParseKeyPEM(leafKeyPEM)
	require.NoError(t, err)
	_, err = LoadCA(leafPEM, leafKeyPEM)
	assert.ErrorContains(t, err, "is not a CA")

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "grandchild"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, leaf, key.Public(), leafKey)
	require.NoError(t, err)
	grandchild, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(ca.Cert)
	inter.AddCert(leaf)
	_, err = grandchild.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.Error(t, err)
}

func TestLoadCA(t *testing.T) {
	ca := newTestCA(t)
	keyPEM, err := ca.KeyPEM()
	require.NoError(t, err)
	block, _ := pem.Decode(keyPEM)
	require.Equal(t, "PRIVATE KEY", block.Type)

	loaded, err := LoadCA(ca.CertPEM(), keyPEM)
	require.NoError(t, err)
	assert.Equal(t, ca.Cert.Raw, loaded.Cert.Raw)
	assert.Equal(t, ca.CertPEM(), loaded.CertPEM())

	// A leaf from the loaded CA verifies against the original.
	certPEM, _, err := loaded.Issue(Leaf{CommonName: "c", Client: true})
	require.NoError(t, err)
	assert.NoError(t, verify(t, ca.CertPEM(), certPEM, x509.ExtKeyUsageClientAuth))

	// SEC 1 keys load too.
	der, err := x509.MarshalECPrivateKey(ca.key.(*ecdsa.PrivateKey))
	require.NoError(t, err)
	_, err = LoadCA(ca.CertPEM(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	assert.NoError(t, err)
}

func TestLoadCARSA(t *testing.T) {
	// Users may bring an RSA CA; leaves are still P-256.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rsa-ca"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})

	ca, err := LoadCA(caPEM, keyPEM)
	require.NoError(t, err)
	certPEM, leafKeyPEM, err := ca.Issue(Leaf{CommonName: "c", Client: true})
	require.NoError(t, err)
	assert.NoError(t, verify(t, caPEM, certPEM, x509.ExtKeyUsageClientAuth))
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	leaf, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	require.True(t, ok, "the leaf's key is %T, not ECDSA", leaf.PublicKey)
	assert.Equal(t, elliptic.P256(), pub.Curve, "the leaf's curve")
	assert.Equal(t, x509.SHA256WithRSA, leaf.SignatureAlgorithm, "signed by the RSA CA")
	kb, _ := pem.Decode(leafKeyPEM)
	require.NotNil(t, kb)
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		k, err = x509.ParseECPrivateKey(kb.Bytes)
	}
	require.NoError(t, err)
	assert.IsType(t, &ecdsa.PrivateKey{}, k, "the leaf's private key")
}

func TestLoadCAErrors(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	caKey, err := ca.KeyPEM()
	require.NoError(t, err)
	otherKey, err := other.KeyPEM()
	require.NoError(t, err)

	tests := []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{name: "empty cert", cert: nil, key: caKey, want: "load CA certificate: empty PEM data"},
		{name: "garbage cert", cert: []byte("not pem"), key: caKey, want: "load CA certificate: no PEM block found"},
		{name: "key as cert", cert: caKey, key: caKey, want: `PEM block is "PRIVATE KEY", want "CERTIFICATE"`},
		{name: "empty key", cert: ca.CertPEM(), key: nil, want: "load CA key: empty PEM data"},
		{name: "cert as key", cert: ca.CertPEM(), key: ca.CertPEM(), want: `load CA key: PEM block is "CERTIFICATE", want a private key`},
		{name: "mismatched key", cert: ca.CertPEM(), key: otherKey, want: "private key does not match certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadCA(tt.cert, tt.key)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
