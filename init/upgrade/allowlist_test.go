package upgrade

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
)

// TestStageUpgradeAllowlist: with upgrade.registries set, a reference to
// another registry is refused at once, before any network traffic (the
// registry named here does not exist), and nothing starts to stage.
func TestStageUpgradeAllowlist(t *testing.T) {
	a := &Agent{ESP: slot.Dir(t.TempDir()), Logf: t.Logf}
	a.Seed.Registries = []string{"10.88.0.1:5000"}
	err := a.Stage(t.Context(), "evil.invalid/etcdbox@sha256:"+strings.Repeat("a", 64), false)
	require.ErrorIs(t, err, server.ErrRefused)
	assert.ErrorIs(t, err, ErrRegistryNotAllowed)
	assert.Contains(t, err.Error(), "evil.invalid is not in the seed's upgrade.registries")
	assert.Equal(t, nodeapi.PhaseIdle, a.Progress().Phase, "staging started")

	err = a.Stage(t.Context(), "10.88.0.1:5000/etcdbox:latest", true)
	require.ErrorIs(t, err, server.ErrBadRequest, "a tag, not a digest")
	assert.Equal(t, nodeapi.PhaseIdle, a.Progress().Phase)
}
