package imagesig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// ParsePublicKey reads one PEM public key (PKIX, as `cosign
// generate-key-pair` writes cosign.pub): ECDSA P-256/P-384 or Ed25519.
func ParsePublicKey(pemText string) (crypto.PublicKey, error) {
	block, rest := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("text after the PEM block: give one key per entry")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("a %q block: want a PUBLIC KEY", block.Type)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return nil, fmt.Errorf("ECDSA on %s: want P-256 or P-384", k.Curve.Params().Name)
		}
		return k, nil
	case ed25519.PublicKey:
		return k, nil
	}
	return nil, fmt.Errorf("a %T key: want ECDSA or Ed25519", k)
}

// ParsePrivateKey reads a PEM private key (PKCS#8, or SEC 1 "EC PRIVATE
// KEY"), unencrypted. cosign's own key files are encrypted with its
// password scheme, which this does not read.
func ParsePrivateKey(pemText []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(pemText)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	var k any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
		return nil, fmt.Errorf("a %q block: etcdbox reads unencrypted PKCS#8 keys only (etcdbox sign keygen makes a pair)", block.Type)
	default:
		return nil, fmt.Errorf("a %q block: want a PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case *ecdsa.PrivateKey:
		return k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("a %T key: want ECDSA or Ed25519", k)
}

// GenerateKey makes an ECDSA P-256 key pair (cosign's default kind) and
// returns the private key as PKCS#8 PEM and the public key as PKIX PEM.
func GenerateKey() (private, public []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), nil
}
