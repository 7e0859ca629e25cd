package nodeapi

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

// TestTLSFiles: AdminFiles names pki init's files; Config loads any
// three, and names the one that fails.
func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, pki.Init(dir, false))
	files := AdminFiles(dir)
	assert.Equal(t, TLSFiles{filepath.Join(dir, "ca.crt"), filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")}, files)
	assert.False(t, files.IsZero())
	assert.True(t, TLSFiles{}.IsZero())
	tc, err := files.Config()
	require.NoError(t, err)
	assert.Len(t, tc.Certificates, 1)
	assert.NotNil(t, tc.RootCAs)

	_, err = TLSFiles{CACert: files.CACert, Cert: files.Cert}.Config()
	assert.ErrorContains(t, err, "want a CA certificate, a certificate and a key")
	_, err = TLSFiles{CACert: files.CACert, Cert: files.Cert, Key: files.Key + ".gone"}.Config()
	assert.ErrorContains(t, err, "load admin certificate "+files.Cert)
	_, err = TLSFiles{CACert: files.Key, Cert: files.Cert, Key: files.Key}.Config()
	assert.ErrorContains(t, err, "load cluster CA "+files.Key+": no certificate")
}

// TestClientStage: a request that runs out of time says at which stage,
// here a server that accepts and never answers: the TLS handshake.
func TestClientStage(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, pki.Init(dir, false))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	c, err := NewClientFiles(l.Addr().String(), AdminFiles(dir))
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = c.Status(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GET https://"+l.Addr().String()+"/v1/status: no answer in the TLS handshake (connected): ")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
