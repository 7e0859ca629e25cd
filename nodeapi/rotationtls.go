package nodeapi

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdbox/etcdbox/pki"
)

// RotationTLS is the client side of mutual TLS during a CA rotation from
// the CA in pkiDir to the one in nextDir (both as `etcdbox pki init`
// writes them): both roots are trusted, and both admin certificates are
// offered, the old one first. A server names the CAs it accepts client
// certificates from, and crypto/tls presents the first certificate one
// of them issued: a node that trusts the old root (before the rotation
// and up to its drop phase) gets the old admin certificate, a node that
// trusts the new root only (after the drop) the new one. The names of
// the two roots must differ (pki.InitNamed), since the server names them
// by subject.
func RotationTLS(pkiDir, nextDir string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	var certs []tls.Certificate
	for _, dir := range []string{pkiDir, nextDir} {
		certPath, keyPath := filepath.Join(dir, pki.AdminCertFile), filepath.Join(dir, pki.AdminKeyFile)
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("load admin certificate %s: %w", certPath, err)
		}
		caPath := filepath.Join(dir, pki.CACertFile)
		caPEM, err := os.ReadFile(caPath)
		if err != nil {
			return nil, fmt.Errorf("load cluster CA: %w", err)
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("load cluster CA %s: no certificate", caPath)
		}
		certs = append(certs, cert)
	}
	if certs[0].Leaf != nil && certs[1].Leaf != nil && string(certs[0].Leaf.RawIssuer) == string(certs[1].Leaf.RawIssuer) {
		return nil, fmt.Errorf("the CAs in %s and %s have the same name, %q: a server could not tell which admin certificate it accepts; make the next CA with etcdbox pki rotate-ca",
			pkiDir, nextDir, certs[0].Leaf.Issuer.CommonName)
	}
	return &tls.Config{Certificates: certs, RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}
