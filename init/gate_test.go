package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

// TestHealthLookKeepsItsClient looks at a bin/etcd member on loopback as
// the health gate does: healthy looks share one client (no TLS handshake
// per look); a look that finds a problem drops it, and the next one dials
// again.
func TestHealthLookKeepsItsClient(t *testing.T) {
	t.Parallel()
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1")
	started, dials := false, 0
	h := &healthLook{
		started: func() bool { return started },
		dial: func() (*clientv3.Client, error) {
			dials++
			return rollout.Dial([]string{c.Member(t, "n1").ClientURL}, c.TLS())
		},
	}
	defer h.close()
	ctx := t.Context()

	assert.Equal(t, "etcd not started", h.problem(ctx))
	assert.Zero(t, dials, "nothing to dial before etcd starts")

	started = true
	for range 3 {
		require.Empty(t, h.problem(ctx))
	}
	assert.Equal(t, 1, dials, "three healthy looks, one client")

	c.Kill("n1")
	assert.Contains(t, h.problem(ctx), "etcd does not answer")
	assert.Nil(t, h.c, "a look that found a problem drops its client")
	h.problem(ctx)
	assert.Equal(t, 2, dials, "the look after a problem dials again")
}
