package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/upgrade"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/seed"
)

// TestStageUpgradeAllowlist: with upgrade.registries set, a reference to
// another registry is refused at once, before any network traffic (the
// registry named here does not exist), and nothing starts to stage.
func TestStageUpgradeAllowlist(t *testing.T) {
	n := &node{log: console.New(), esp: slot.Dir(t.TempDir()), seed: &seed.Seed{}}
	n.seed.Upgrade.Registries = []string{"10.88.0.1:5000"}
	a := &apiNode{n: n}
	err := a.StageUpgrade(t.Context(), "evil.invalid/etcdbox@sha256:"+strings.Repeat("a", 64), false)
	require.ErrorIs(t, err, server.ErrRefused)
	assert.ErrorIs(t, err, upgrade.ErrRegistryNotAllowed)
	assert.Contains(t, err.Error(), "evil.invalid is not in the seed's upgrade.registries")
	assert.Equal(t, nodeapi.PhaseIdle, a.Upgrade().Phase, "staging started")

	err = a.StageUpgrade(t.Context(), "10.88.0.1:5000/etcdbox:latest", true)
	require.ErrorIs(t, err, server.ErrBadRequest, "a tag, not a digest")
	assert.Equal(t, nodeapi.PhaseIdle, a.Upgrade().Phase)
}
