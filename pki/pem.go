package pki

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// PEM block types.
const (
	certBlock = "CERTIFICATE"
	keyBlock  = "PRIVATE KEY"
)

// ParseCertPEM parses the first PEM block of data, which must be a
// certificate. Text around PEM blocks is ignored; further blocks are ignored.
func ParseCertPEM(data []byte) (*x509.Certificate, error) {
	block, err := firstBlock(data)
	if err != nil {
		return nil, err
	}
	if block.Type != certBlock {
		return nil, fmt.Errorf("PEM block is %q, want %q", block.Type, certBlock)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return cert, nil
}

// maxKeyDER bounds a private key's DER: an RSA 8192 key is about 4.8 KB.
const maxKeyDER = 8 << 10

// ParseKeyPEM parses the first PEM block of data as a private key: PKCS #8
// ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE KEY").
// Encrypted keys are not supported: a node has nobody to ask for a password.
func ParseKeyPEM(data []byte) (crypto.Signer, error) {
	block, err := firstBlock(data)
	if err != nil {
		return nil, err
	}
	// Checking an RSA key costs time that grows fast with its size, and a
	// key comes from a seed, which anyone with a cidata volume writes.
	if len(block.Bytes) > maxKeyDER {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d of any key etcdbox uses (RSA 8192 and below, ECDSA, Ed25519)", block.Type, len(block.Bytes), maxKeyDER)
	}
	var key any
	switch block.Type {
	case keyBlock:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("encrypted private keys are not supported")
	default:
		return nil, fmt.Errorf("PEM block is %q, want a private key", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", key)
	}
	return signer, nil
}

// KeyMatches reports, as an error, whether key is not the private key of
// cert.
func KeyMatches(cert *x509.Certificate, key crypto.Signer) error {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return fmt.Errorf("private key does not match certificate %q", cert.Subject.CommonName)
	}
	return nil
}

// Expiry returns the NotAfter time of the first certificate in certPEM.
func Expiry(certPEM []byte) (time.Time, error) {
	cert, err := ParseCertPEM(certPEM)
	if err != nil {
		return time.Time{}, err
	}
	return cert.NotAfter, nil
}

func firstBlock(data []byte) (*pem.Block, error) {
	if len(data) == 0 {
		return nil, errors.New("empty PEM data")
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	return block, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: keyBlock, Bytes: der}), nil
}
