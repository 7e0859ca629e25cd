package cluster

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

func TestSeedUpgrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	parse := func(up Upgrade) seed.Upgrade {
		t.Helper()
		b, err := seedWith(dir, "demo.internal", 1, up, seed.Backup{})
		require.NoError(t, err)
		s, err := seed.Parse(b)
		require.NoError(t, err, "seed:\n%s", b)
		return s.Upgrade
	}

	def := parse(Upgrade{})
	assert.Equal(t, []string{GuestRegistry()}, def.InsecureRegistries)
	assert.Equal(t, 15, def.SettleSeconds)
	assert.Equal(t, 180, def.GateSeconds)
	assert.Equal(t, seed.DefaultTries, def.Tries, "tries: the seed's default")

	got := parse(Upgrade{Tries: 1, Settle: 10 * time.Second, Gate: time.Minute})
	assert.Equal(t, 1, got.Tries)
	assert.Equal(t, 10, got.SettleSeconds)
	assert.Equal(t, 60, got.GateSeconds)

	for _, bad := range []Upgrade{{Tries: -1}, {Settle: -time.Second}, {Gate: 1500 * time.Millisecond}} {
		_, err := seedWith(dir, "demo.internal", 1, bad, seed.Backup{})
		assert.Error(t, err, "%+v", bad)
	}
}
