// Package pki makes and loads the certificates of an etcdbox cluster
// (DESIGN §6): the operator's root CA, the admin client certificates it
// signs, the node CA (an intermediate, name-constrained, that the seed
// carries) and the server/peer leaves each node issues for itself from
// it. A node can thus sign its own leaves, and nothing that counts as an
// admin (IsAdmin).
//
// It uses only the standard library (crypto/x509) because the PID-1 init
// links it.
//
//	ca, err := pki.NewCA("etcdbox-ca", 0)
//	dns, ips := pki.NodeSANs("n1", []string{"example.internal"}, []net.IP{addr})
//	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: "n1", DNSNames: dns, IPs: ips, Server: true, Client: true})
//
// Keys are ECDSA P-256, stored as PKCS #8 ("PRIVATE KEY"). Certificates carry
// random 128-bit serial numbers and start 5 minutes in the past, so that a
// node whose clock is slightly behind still accepts them.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"
)

const (
	// DefaultCAValidity is the lifetime of a CA made with a zero validity.
	DefaultCAValidity = 10 * 365 * 24 * time.Hour
	// DefaultLeafValidity is the lifetime of a leaf issued with a zero
	// validity. Leaves are renewed at two thirds of their life.
	DefaultLeafValidity = 90 * 24 * time.Hour
	// ClockSkew is how far NotBefore is backdated.
	ClockSkew = 5 * time.Minute
)

// CA is a certificate authority that can issue leaves.
type CA struct {
	// Cert is the parsed CA certificate.
	Cert *x509.Certificate

	certPEM []byte
	key     crypto.Signer
}

// Leaf describes a certificate to issue with (*CA).Issue.
type Leaf struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// Server adds the TLS server-auth extended key usage, Client the
	// client-auth one. Peer certificates need both; at least one is required,
	// because a leaf without extended key usages would be valid for any use.
	Server, Client bool
	// Validity is the certificate's lifetime; zero means DefaultLeafValidity.
	// It is cut to the CA's own expiry.
	Validity time.Duration
	// Key, when set, is the leaf's key: a renewal keeps the key, so that
	// swapping the certificate file alone is atomic. Nil makes a new one.
	Key crypto.Signer
	// URIs are URI SANs (the admin's AdminURI).
	URIs []*url.URL
}

// now is a seam for tests.
var now = time.Now

// NewCA makes a self-signed root CA with a fresh P-256 key. A zero
// validity means DefaultCAValidity. It may sign one level of CA below it
// (path length 1): the node CA (IssueNodeCA). Roots made before node CAs
// existed have path length 0 and sign leaves only.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("new CA: empty common name")
	}
	if validity < 0 {
		return nil, fmt.Errorf("new CA %q: negative validity %v", commonName, validity)
	}
	if validity == 0 {
		validity = DefaultCAValidity
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("new CA %q: %w", commonName, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, fmt.Errorf("new CA %q: %w", commonName, err)
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             t.Add(-ClockSkew),
		NotAfter:              t.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}
	// SubjectKeyId is derived by CreateCertificate for CAs.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("new CA %q: create certificate: %w", commonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("new CA %q: parse certificate: %w", commonName, err)
	}
	return &CA{Cert: cert, certPEM: encodeCert(der), key: key}, nil
}

// LoadCA loads a CA from its PEM certificate and PEM private key (PKCS #8,
// SEC 1 "EC PRIVATE KEY" or PKCS #1 "RSA PRIVATE KEY"). It checks that the
// certificate is a CA allowed to sign certificates and that the key matches
// it.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA certificate: %w", err)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		return nil, fmt.Errorf("load CA: certificate %q is not a CA", cert.Subject.CommonName)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("load CA: certificate %q may not sign certificates", cert.Subject.CommonName)
	}
	key, err := ParseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA key: %w", err)
	}
	if err := KeyMatches(cert, key); err != nil {
		return nil, fmt.Errorf("load CA %q: %w", cert.Subject.CommonName, err)
	}
	return &CA{Cert: cert, certPEM: encodeCert(cert.Raw), key: key}, nil
}

// CertPEM returns the CA certificate in PEM form.
func (ca *CA) CertPEM() []byte {
	return append([]byte(nil), ca.certPEM...)
}

// KeyPEM returns the CA private key as a PKCS #8 PEM block.
func (ca *CA) KeyPEM() ([]byte, error) {
	return encodeKey(ca.key)
}

// Issue makes a leaf certificate signed by ca, with l.Key or a fresh P-256
// key, and returns both in PEM form. A leaf of a CA that is not a root
// (the node CA) comes with that CA's certificate after it, the chain a
// TLS peer needs. DNS names and addresses ca's name constraints do not
// permit are left out (Permitted).
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	if l.CommonName == "" {
		return nil, nil, errors.New("issue leaf: empty common name")
	}
	if !l.Server && !l.Client {
		return nil, nil, fmt.Errorf("issue leaf %q: neither server nor client usage", l.CommonName)
	}
	l.DNSNames, l.IPs = ca.Permitted(l.DNSNames, l.IPs)
	if l.Server && len(l.DNSNames) == 0 && len(l.IPs) == 0 {
		// TLS clients check SANs only, never the common name.
		return nil, nil, fmt.Errorf("issue leaf %q: server certificate without DNS names or IPs", l.CommonName)
	}
	if l.Validity < 0 {
		return nil, nil, fmt.Errorf("issue leaf %q: negative validity %v", l.CommonName, l.Validity)
	}
	if l.Validity == 0 {
		l.Validity = DefaultLeafValidity
	}
	var eku []x509.ExtKeyUsage
	if l.Server {
		eku = append(eku, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	key := l.Key
	if key == nil {
		if key, err = newKey(); err != nil {
			return nil, nil, fmt.Errorf("issue leaf %q: %w", l.CommonName, err)
		}
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, fmt.Errorf("issue leaf %q: %w", l.CommonName, err)
	}
	t := now()
	notAfter := t.Add(l.Validity)
	if notAfter.After(ca.Cert.NotAfter) {
		// A leaf cannot outlive its CA: verification fails past the CA's
		// expiry anyway, and the shorter date shows in status.
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: l.CommonName},
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
		URIs:         l.URIs,
		NotBefore:    t.Add(-ClockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  eku,
		// BasicConstraints CA:FALSE, so the leaf cannot act as a CA.
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue leaf %q: create certificate: %w", l.CommonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue leaf %q: %w", l.CommonName, err)
	}
	certPEM = encodeCert(der)
	if !ca.IsRoot() {
		certPEM = append(certPEM, ca.certPEM...)
	}
	return certPEM, keyPEM, nil
}

// IsRoot reports whether ca is self-issued: a root, not the node CA.
func (ca *CA) IsRoot() bool {
	return bytes.Equal(ca.Cert.RawIssuer, ca.Cert.RawSubject)
}

func newKey() (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate P-256 key: %w", err)
	}
	return key, nil
}

// serialLimit is 2^128: serials are random 128-bit numbers.
var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

func newSerial() (*big.Int, error) {
	for {
		n, err := rand.Int(rand.Reader, serialLimit)
		if err != nil {
			return nil, fmt.Errorf("generate serial number: %w", err)
		}
		if n.Sign() > 0 { // RFC 5280 wants a positive serial
			return n, nil
		}
	}
}
