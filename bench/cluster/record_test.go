package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fig "github.com/etcdbox/etcdbox/bench/internal/figures"
)

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(fig.DirEnv, dir)
	u := upFigures{one: 10 * time.Second, three: 20 * time.Second, solos: 16 * time.Second, start: 5 * time.Second, add: time.Second}
	f := figures{failover: 3 * time.Second, wiped: 10 * time.Second, cold: 30 * time.Second}
	dr := drFigures{reboot: 4 * time.Second, restore: 8 * time.Second, recover: 2 * time.Second, rejoin: 6 * time.Second}
	require.NoError(t, record(u, f, dr))
	s, err := fig.Read(dir, "cluster")
	require.NoError(t, err)
	ratios := s.Ratios()
	assert.Equal(t, map[string]float64{
		"cluster.up3": 1.25, "cluster.up1": 0, "cluster.add": 0, "cluster.peer-lost": 0, "cluster.restart": 0.5, "cluster.failover": 3,
		"cluster.wiped": 2, "cluster.cold": 3, "cluster.restore": 2, "cluster.quorum-lost": 0, "cluster.recover": 0.5,
		"cluster.rejoin": 1.5,
	}, ratios)
}
