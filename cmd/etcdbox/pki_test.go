package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

func TestPKIInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"pki", "init", "--dir", dir}, &stdout, &stderr))

	var want []string
	for _, name := range pki.InitFiles {
		want = append(want, filepath.Join(dir, name))
	}
	assert.Equal(t, strings.Join(want, "\n")+"\n", stdout.String())
	assert.Empty(t, stderr.String())

	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		return b
	}
	caPEM := read(pki.CACertFile)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	admin, err := pki.ParseCertPEM(read(pki.AdminCertFile))
	require.NoError(t, err)
	_, err = admin.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err, "admin certificate verifies for client auth")
	_, err = admin.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.Error(t, err, "admin certificate must not verify for server auth")
	for _, name := range []string{pki.CAKeyFile, pki.AdminKeyFile} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "mode of %s", name)
	}

	// Again: refused, CA kept.
	stdout.Reset()
	err = run(context.Background(), []string{"pki", "init", "--dir", dir}, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, pki.CACertFile))
	assert.Contains(t, err.Error(), "--force")
	assert.Empty(t, stdout.String())
	assert.Equal(t, caPEM, read(pki.CACertFile))

	// --force replaces it.
	require.NoError(t, run(context.Background(), []string{"pki", "init", "--dir", dir, "--force"}, &stdout, &stderr))
	assert.NotEqual(t, caPEM, read(pki.CACertFile))
}

func TestPKIInitUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no dir", args: []string{"pki", "init"}, want: `"dir" not set`},
		{name: "extra argument", args: []string{"pki", "init", "--dir", t.TempDir(), "extra"}, want: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
