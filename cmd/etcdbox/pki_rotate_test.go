package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func TestPKIIssueAdmin(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"pki", "issue-admin", "--dir", dir, "--name", "alice@ops", "--ttl", "720h"}, &out, &out))
	certPath, keyPath := filepath.Join(dir, "admin-alice@ops.crt"), filepath.Join(dir, "admin-alice@ops.key")
	assert.Equal(t, certPath+"\n"+keyPath+"\n", out.String())

	ca, err := pki.ParseCertPEM(readFile(t, filepath.Join(dir, pki.CACertFile)))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	certPEM := readFile(t, certPath)
	admin, err := pki.ParseCertPEM(certPEM)
	require.NoError(t, err)
	assert.Equal(t, "alice@ops", admin.Subject.CommonName)
	assert.WithinDuration(t, time.Now().Add(720*time.Hour), admin.NotAfter, time.Hour)
	chains, err := admin.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	assert.True(t, pki.IsAdmin(chains), "an admin certificate")
	key, err := pki.ParseKeyPEM(readFile(t, keyPath))
	require.NoError(t, err)
	assert.NoError(t, pki.KeyMatches(admin, key))
	st, err := os.Stat(keyPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// Again: refused, files kept; --force replaces them.
	out.Reset()
	err = run(context.Background(), []string{"pki", "issue-admin", "--dir", dir, "--name", "alice@ops"}, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), certPath)
	assert.Contains(t, err.Error(), "--force")
	assert.Equal(t, exitError, exitCode(err))
	assert.Equal(t, certPEM, readFile(t, certPath))
	require.NoError(t, run(context.Background(), []string{"pki", "issue-admin", "--dir", dir, "--name", "alice@ops", "--force"}, &out, &out))
	assert.NotEqual(t, certPEM, readFile(t, certPath))

	// -o PREFIX.
	prefix := filepath.Join(t.TempDir(), "ci")
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"pki", "issue-admin", "--dir", dir, "--name", "ci", "-o", prefix}, &out, &out))
	assert.Equal(t, prefix+".crt\n"+prefix+".key\n", out.String())
}

func TestPKIIssueAdminUsage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no name", []string{"--dir", dir}, `required flag(s) "name" not set`, exitUsage},
		{"empty name", []string{"--dir", dir, "--name", ""}, `--name "": want letters`, exitUsage},
		{"path in name", []string{"--dir", dir, "--name", "../x"}, `--name "../x"`, exitUsage},
		{"space in name", []string{"--dir", dir, "--name", "a b"}, `--name "a b"`, exitUsage},
		{"long name", []string{"--dir", dir, "--name", strings.Repeat("a", 65)}, "at most 64", exitUsage},
		{"zero ttl", []string{"--dir", dir, "--name", "a", "--ttl", "0s"}, "--ttl 0s: want a positive duration", exitUsage},
		{"no CA", []string{"--dir", t.TempDir(), "--name", "a"}, "load CA", exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"pki", "issue-admin"}, tc.args...), &out, &out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.code, exitCode(err))
		})
	}
}

// pemCerts parses every certificate of a PEM bundle.
func pemCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		out = append(out, c)
	}
}

func TestPKIRotateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"pki", "rotate-ca", "--dir", dir}, &out, &out))
	t.Log("\n" + out.String())
	next := filepath.Join(dir, "next")
	for _, f := range pki.InitFiles {
		assert.Contains(t, out.String(), filepath.Join(next, f)+"\n")
	}
	assert.Contains(t, out.String(), "etcdbox rotate-ca")
	oldCA, err := pki.LoadCAFiles(dir)
	require.NoError(t, err)
	nextCA, err := pki.LoadCAFiles(next)
	require.NoError(t, err)
	assert.Regexp(t, `^etcdbox-ca-\d{8}-\d{6}$`, nextCA.Cert.Subject.CommonName)
	assert.NotEqual(t, oldCA.Cert.RawSubject, nextCA.Cert.RawSubject, "a distinct name")
	admin, err := pki.ParseCertPEM(readFile(t, filepath.Join(next, pki.AdminCertFile)))
	require.NoError(t, err)
	assert.Equal(t, nextCA.Cert.RawSubject, admin.RawIssuer, "next/ has its own admin certificate")

	bundle := pemCerts(t, readFile(t, filepath.Join(dir, "ca-bundle.crt")))
	require.Len(t, bundle, 2)
	assert.True(t, bundle[0].Equal(oldCA.Cert))
	assert.True(t, bundle[1].Equal(nextCA.Cert))

	// Again: refused, next/ kept; --force makes another.
	nextPEM := nextCA.CertPEM()
	err = run(context.Background(), []string{"pki", "rotate-ca", "--dir", dir}, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), next)
	assert.Contains(t, err.Error(), "--force")
	assert.Equal(t, nextPEM, readFile(t, filepath.Join(next, pki.CACertFile)))
	stale := filepath.Join(next, "admin-alice.crt")
	require.NoError(t, os.WriteFile(stale, []byte("an admin certificate of the next CA replaced"), 0o644))
	require.NoError(t, run(context.Background(), []string{"pki", "rotate-ca", "--dir", dir, "--force"}, &out, &out))
	assert.NotEqual(t, nextPEM, readFile(t, filepath.Join(next, pki.CACertFile)))
	assert.NoFileExists(t, stale, "--force replaces next/ whole")
	assert.Len(t, pemCerts(t, readFile(t, filepath.Join(dir, "ca-bundle.crt"))), 2)

	// No CA to rotate from.
	err = run(context.Background(), []string{"pki", "rotate-ca", "--dir", t.TempDir()}, &out, &out)
	assert.ErrorContains(t, err, "the current CA")
}

// TestPKIRotateCASameSecond: the next CA never takes the current one's
// name, even when made in the second the current one was.
func TestPKIRotateCASameSecond(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.InitNamed(dir, "etcdbox-ca-20260301-120000", false))
	require.NoError(t, prepareRotation(dir, false, at, &bytes.Buffer{}))
	nextCA, err := pki.LoadCAFiles(filepath.Join(dir, "next"))
	require.NoError(t, err)
	assert.Equal(t, "etcdbox-ca-20260301-120000-2", nextCA.Cert.Subject.CommonName)
}
