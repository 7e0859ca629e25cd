package nodeapi

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

// rotationDirs makes an old and a next CA, as pki init and pki rotate-ca
// do, and loads them.
func rotationDirs(t *testing.T) (oldDir, nextDir string, oldCA, nextCA *pki.CA) {
	t.Helper()
	oldDir = filepath.Join(t.TempDir(), "pki")
	nextDir = filepath.Join(oldDir, "next")
	require.NoError(t, pki.Init(oldDir, false))
	require.NoError(t, pki.InitNamed(nextDir, "etcdbox-ca-20260301-120000", false))
	var err error
	oldCA, err = pki.LoadCAFiles(oldDir)
	require.NoError(t, err)
	nextCA, err = pki.LoadCAFiles(nextDir)
	require.NoError(t, err)
	return oldDir, nextDir, oldCA, nextCA
}

func TestRotationTLS(t *testing.T) {
	oldDir, nextDir, oldCA, nextCA := rotationDirs(t)
	tc, err := RotationTLS(oldDir, nextDir)
	require.NoError(t, err)
	assert.Equal(t, uint16(tls.VersionTLS13), tc.MinVersion)
	require.Len(t, tc.Certificates, 2)
	assert.Equal(t, oldCA.Cert.RawSubject, tc.Certificates[0].Leaf.RawIssuer, "the old admin certificate first")
	assert.Equal(t, nextCA.Cert.RawSubject, tc.Certificates[1].Leaf.RawIssuer, "then the new one")

	// The pool verifies a server leaf of either root.
	for _, ca := range []*pki.CA{oldCA, nextCA} {
		certPEM, _, err := ca.Issue(pki.Leaf{CommonName: "n1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
		require.NoError(t, err)
		leaf, err := pki.ParseCertPEM(certPEM)
		require.NoError(t, err)
		_, err = leaf.Verify(x509.VerifyOptions{Roots: tc.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.NoError(t, err, "a leaf of %s", ca.Cert.Subject.CommonName)
	}

	// The certificate crypto/tls picks for the CAs a server accepts.
	pick := func(cas ...*pki.CA) *x509.Certificate {
		cri := &tls.CertificateRequestInfo{Version: tls.VersionTLS13, SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}}
		for _, ca := range cas {
			cri.AcceptableCAs = append(cri.AcceptableCAs, ca.Cert.RawSubject)
		}
		for _, c := range tc.Certificates {
			if cri.SupportsCertificate(&c) == nil {
				return c.Leaf
			}
		}
		return nil
	}
	assert.Equal(t, oldCA.Cert.RawSubject, pick(oldCA).RawIssuer, "before the trust phase")
	assert.Equal(t, oldCA.Cert.RawSubject, pick(oldCA, nextCA).RawIssuer, "from trust to drop")
	assert.Equal(t, nextCA.Cert.RawSubject, pick(nextCA).RawIssuer, "after the drop")
}

// TestRotationTLSHandshake: a server that accepts client certificates of
// one root gets the admin certificate of that root.
func TestRotationTLSHandshake(t *testing.T) {
	oldDir, nextDir, oldCA, nextCA := rotationDirs(t)
	tc, err := RotationTLS(oldDir, nextDir)
	require.NoError(t, err)
	for _, tt := range []struct {
		name    string
		accepts []*pki.CA
		want    *pki.CA
	}{
		{"old root", []*pki.CA{oldCA}, oldCA},
		{"both", []*pki.CA{oldCA, nextCA}, oldCA},
		{"new root", []*pki.CA{nextCA}, nextCA},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := handshake(t, tc, tt.want, tt.accepts)
			require.NotNil(t, got)
			assert.Equal(t, tt.want.Cert.RawSubject, got.RawIssuer)
			assert.True(t, pki.IsAdmin([][]*x509.Certificate{{got, tt.want.Cert}}))
		})
	}
}

// handshake serves with a leaf of serverCA, accepting client certificates
// of accepts, dials it with tc and returns the client certificate the
// server got.
func handshake(t *testing.T, tc *tls.Config, serverCA *pki.CA, accepts []*pki.CA) *x509.Certificate {
	t.Helper()
	certPEM, keyPEM, err := serverCA.Issue(pki.Leaf{CommonName: "n1", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	require.NoError(t, err)
	serverCert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	clientCAs := x509.NewCertPool()
	for _, ca := range accepts {
		clientCAs.AddCert(ca.Cert)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: clientCAs,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13,
	})
	require.NoError(t, err)
	defer l.Close()
	got := make(chan *x509.Certificate, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		conn := c.(*tls.Conn)
		if conn.Handshake() != nil || len(conn.ConnectionState().PeerCertificates) == 0 {
			got <- nil
			return
		}
		got <- conn.ConnectionState().PeerCertificates[0]
		conn.Write([]byte{1}) // so the client sees the server's verdict
	}()
	c, err := tls.Dial("tcp", l.Addr().String(), tc)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	require.NoError(t, err)
	return <-got
}

func TestRotationTLSErrors(t *testing.T) {
	oldDir, _, _, _ := rotationDirs(t)
	_, err := RotationTLS(oldDir, filepath.Join(t.TempDir(), "none"))
	assert.ErrorContains(t, err, "load admin certificate")

	same := filepath.Join(t.TempDir(), "same")
	require.NoError(t, pki.Init(same, false))
	_, err = RotationTLS(oldDir, same)
	assert.ErrorContains(t, err, `have the same name, "etcdbox-ca"`)
}
