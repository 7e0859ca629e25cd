// Package floorpki is the PKI of the throughput bench's TLS floor: a CA
// that the bench and every floor VM derive from one 32-byte seed, which
// the bench draws for each run and hands the VMs on their kernel command
// line (floor.tls=HEX), so that no file has to reach them. Each party
// issues its own leaf from it.
//
// It is for the bench only: whoever reads the command line holds the CA.
// The floor's etcd then speaks mutual TLS as an etcdbox node's does (TLS
// 1.3, client certificates on the client and peer ports), so the floor
// with it and the floor without it, side by side, show what TLS costs,
// and ours against the TLS floor what the appliance costs beyond it.
package floorpki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// SeedSize is the length of a CA seed in bytes.
const SeedSize = ed25519.SeedSize

// CA is the floor's certificate authority.
type CA struct {
	Cert *x509.Certificate
	key  ed25519.PrivateKey
}

// NewSeed draws a CA seed.
func NewSeed() ([]byte, error) {
	s := make([]byte, SeedSize)
	_, err := rand.Read(s)
	return s, err
}

// ParseSeed reads a seed written as hexadecimal.
func ParseSeed(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != SeedSize {
		return nil, fmt.Errorf("floor CA seed %q: want %d bytes in hexadecimal", s, SeedSize)
	}
	return b, nil
}

// New derives the CA of seed. The same seed gives the same certificate,
// byte for byte: an Ed25519 key from the seed, Ed25519's deterministic
// signature, and fixed fields.
func New(seed []byte) (*CA, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("floor CA seed: %d bytes, want %d", len(seed), SeedSize)
	}
	key := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "etcdbox bench floor CA"},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("floor CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, key: key}, nil
}

// CertPEM is the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool is a pool holding the CA certificate only.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue issues a leaf for name, good for both ends of a connection (an
// etcd member serves clients and dials its peers with one), with ips as
// its addresses, on a fresh ECDSA P-256 key as an etcdbox node's. It
// returns the certificate and the key in PEM.
func (ca *CA) Issue(name string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s: %w", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}
