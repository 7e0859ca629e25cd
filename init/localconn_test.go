package main

import (
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

// TestLocalConnWaitsForTheListener: no client is made while the member's
// port refuses connections; one is made once etcd listens, and kept while
// it answers; when etcd exits, a failed request drops it.
func TestLocalConnWaitsForTheListener(t *testing.T) {
	t.Parallel()
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	u, err := url.Parse(c.Member(t, "n1").ClientURL)
	require.NoError(t, err)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t))) // nothing listens yet
	dials := 0
	l := &localConn{
		addr: func() string { return addr },
		dial: func() (*clientv3.Client, error) {
			dials++
			return rollout.Dial([]string{"https://" + addr}, c.TLS())
		},
	}
	defer l.close()
	ctx := t.Context()

	for range 2 {
		cli, err := l.get()
		require.NoError(t, err)
		assert.Nil(t, cli, "no client while the port refuses")
	}
	assert.Zero(t, dials)

	addr = net.JoinHostPort("127.0.0.1", u.Port()) // etcd listens
	for range 3 {
		cli, err := l.get()
		require.NoError(t, err)
		require.NotNil(t, cli)
		require.NoError(t, ready(ctx, cli))
		l.failed() // the port accepts: the client stays
	}
	assert.Equal(t, 1, dials, "one client while etcd answers")

	c.Kill("n1")
	cli, err := l.get()
	require.NoError(t, err)
	require.NotNil(t, cli)
	assert.Error(t, ready(ctx, cli), "etcd was killed")
	l.failed()
	assert.Nil(t, l.c, "a failed request on a refusing port drops the client")
	cli, err = l.get()
	require.NoError(t, err)
	assert.Nil(t, cli, "and none is made until etcd listens again")
	assert.Equal(t, 1, dials)
}

func TestListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	assert.True(t, listening(ln.Addr().String()))
	require.NoError(t, ln.Close())
	assert.False(t, listening(ln.Addr().String()), "a closed port refuses")
}
