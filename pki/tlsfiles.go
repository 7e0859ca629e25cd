package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ClientTLSFromFiles is a client's TLS configuration that reads its
// certificate (certFile, keyFile) and its trusted roots (caFile) afresh
// at every handshake, so that a long-lived client outlives a renewal of
// its leaf and every phase of a CA rotation. The files are read once
// here too, so that a missing or bad one fails at once. The server is
// verified as crypto/tls would (its chain to the roots, for server use,
// and the name dialled), against the roots read at that handshake.
func ClientTLSFromFiles(certFile, keyFile, caFile string) (*tls.Config, error) {
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return nil, fmt.Errorf("load certificate %s: %w", certFile, err)
	}
	if _, err := LoadRoots(caFile); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("load certificate %s: %w", certFile, err)
			}
			return &c, nil
		},
		// Verified below, against the roots of this moment.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			roots, err := LoadRoots(caFile)
			if err != nil {
				return err
			}
			return VerifyServer(cs, roots)
		},
	}, nil
}

// LoadRoots reads a PEM bundle of trusted roots.
func LoadRoots(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("load trusted CAs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("load trusted CAs %s: no certificate", caFile)
	}
	return pool, nil
}

// VerifyServer checks a server's chain against roots, for server use and
// the name the client dialled, as crypto/tls does when it verifies.
func VerifyServer(cs tls.ConnectionState, roots *x509.CertPool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		DNSName:       cs.ServerName,
		Roots:         roots,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}
