package main

import (
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

// silentListener accepts connections on a loopback port and never
// answers on them; it returns the address.
func silentListener(t *testing.T) string {
	t.Helper()
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
	return l.Addr().String()
}

// TestTimeouts: a node API or etcd endpoint that refuses, or accepts and
// never answers, fails within --timeout, and the error names the address
// and why.
func TestTimeouts(t *testing.T) {
	adminDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(adminDir, false))
	closed := "127.0.0.1:" + strconv.Itoa(downPort(t))
	silent := silentListener(t)
	const timeout = time.Second
	// slack is how much longer than --timeout a command may take:
	// generous, for a loaded machine; the default timeouts are 10s and
	// more, so the bound still shows that --timeout applied.
	const slack = 8 * time.Second
	to := []string{"--pki", adminDir, "--timeout", timeout.String()}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"status, refused", []string{"status", "--endpoints", closed}, []string{"https://" + closed, "connection refused"}},
		{"status, silent", []string{"status", "--endpoints", silent}, []string{"GET https://" + silent + "/v1/status: no answer in the TLS handshake", "waited 1s"}},
		{"logs, silent", []string{"logs", "n1", "--endpoints", silent}, []string{"no endpoint answers as node n1", "https://" + silent, "no answer in the TLS handshake"}},
		{"bootstrap, silent", []string{"bootstrap", "--without", "n3", "--endpoints", silent}, []string{"https://" + silent}},
		{"members, refused", []string{"members", "list", "--etcd-endpoints", "https://" + closed}, []string{"no etcd endpoint answers: https://" + closed + ": dial tcp " + closed, "connection refused"}},
		{"members, silent", []string{"members", "list", "--etcd-endpoints", "https://" + silent}, []string{"no etcd endpoint answers: https://" + silent + ": no answer in the TLS handshake", "waited 1s"}},
		{"alarm, silent", []string{"alarm", "list", "--etcd-endpoints", "https://" + silent}, []string{"https://" + silent + ": no answer in the TLS handshake"}},
		{"upgrade status, refused", []string{"upgrade", "--status", "--endpoints", closed, "--etcd-endpoints", "https://" + closed}, []string{"no etcd endpoint answers: https://" + closed + ": dial tcp " + closed, "connection refused"}},
		{"upgrade status, silent", []string{"upgrade", "--status", "--endpoints", closed, "--etcd-endpoints", "https://" + silent}, []string{"https://" + silent + ": no answer in the TLS handshake"}},
		{"rotate-ca status, silent", []string{"rotate-ca", "--status", "--endpoints", closed, "--etcd-endpoints", "https://" + silent}, []string{"https://" + silent + ": no answer in the TLS handshake"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, _, code, err := runExit(t, append(append([]string(nil), tc.args...), to...)...)
			elapsed := time.Since(start)
			require.Error(t, err)
			t.Log(err)
			assert.Equal(t, exitError, code)
			for _, w := range tc.want {
				assert.Contains(t, out+err.Error(), w)
			}
			assert.Less(t, elapsed, timeout+slack, "--timeout %s", timeout)
		})
	}
}
