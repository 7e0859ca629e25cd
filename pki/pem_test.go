package pki

import (
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBadPEM(t *testing.T) {
	badDER := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 0x03, 0x01, 0x01}})
	badKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")})
	badEC := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("junk")})
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("junk")})
	truncated := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n")

	tests := []struct {
		name     string
		in       []byte
		wantCert string // error from ParseCertPEM and Expiry
		wantKey  string // error from ParseKeyPEM
	}{
		{name: "nil", in: nil, wantCert: "empty PEM data", wantKey: "empty PEM data"},
		{name: "text", in: []byte("hello"), wantCert: "no PEM block found", wantKey: "no PEM block found"},
		{name: "truncated", in: truncated, wantCert: "no PEM block found", wantKey: "no PEM block found"},
		{name: "bad certificate DER", in: badDER, wantCert: "parse certificate:", wantKey: `PEM block is "CERTIFICATE", want a private key`},
		{name: "bad PKCS8", in: badKey, wantCert: `PEM block is "PRIVATE KEY", want "CERTIFICATE"`, wantKey: "parse PRIVATE KEY:"},
		{name: "bad SEC1", in: badEC, wantCert: `PEM block is "EC PRIVATE KEY"`, wantKey: "parse EC PRIVATE KEY:"},
		{name: "encrypted", in: encrypted, wantCert: `PEM block is "ENCRYPTED PRIVATE KEY"`, wantKey: "encrypted private keys are not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCertPEM(tt.in)
			assert.ErrorContains(t, err, tt.wantCert, "ParseCertPEM")
			_, err = Expiry(tt.in)
			assert.ErrorContains(t, err, tt.wantCert, "Expiry")
			_, err = ParseKeyPEM(tt.in)
			assert.ErrorContains(t, err, tt.wantKey, "ParseKeyPEM")
		})
	}
}

func TestParseCertPEMSkipsText(t *testing.T) {
	ca := newTestCA(t)
	in := append([]byte("# cluster CA\n"), ca.CertPEM()...)
	cert, err := ParseCertPEM(in)
	require.NoError(t, err)
	assert.Equal(t, ca.Cert.Raw, cert.Raw)

	exp, err := Expiry(in)
	require.NoError(t, err)
	assert.Equal(t, ca.Cert.NotAfter, exp)
}

func TestParseKeyPEMBound(t *testing.T) {
	big := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: make([]byte, maxKeyDER+1)})
	_, err := ParseKeyPEM(big)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than the 8192")
}
