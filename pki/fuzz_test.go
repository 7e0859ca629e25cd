package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"testing"
)

// FuzzPEM: the certificate and key parsers reject any bytes they cannot
// read with an error, never a panic.
func FuzzPEM(f *testing.F) {
	// A cheap key and certificate for the corpus: every fuzz worker runs
	// this, and an RSA CA would take seconds each.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(1)}, &x509.Certificate{SerialNumber: big.NewInt(1)}, key.Public(), key)
	if err != nil {
		f.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN RSA PRIVATE KEY-----\n-----END RSA PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := ParseCertPEM(data); err == nil && c == nil {
			t.Fatal("no certificate and no error")
		}
		if k, err := ParseKeyPEM(data); err == nil && k == nil {
			t.Fatal("no key and no error")
		}
	})
}
