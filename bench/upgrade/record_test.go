package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
)

func TestRecordRoll(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(figures.DirEnv, dir)
	reb := reboots{runs: []reboot{{total: 30 * sec, kernel: 10 * sec, shutdown: 2 * sec}, {total: 40 * sec, kernel: 10 * sec, shutdown: 4 * sec}, {total: 50 * sec, kernel: 10 * sec, shutdown: 9 * sec}},
		writer: writerFigures{gap: 500 * time.Millisecond}}
	rl := roll{total: 140 * sec, steps: []step{{total: 60 * sec, back: 50 * sec}}, writer: writerFigures{gap: sec}}
	mv := moves{n: 3, writer: writerFigures{gap: 250 * time.Millisecond}}
	require.NoError(t, recordRoll(reb, mv, rl))
	require.NoError(t, recordBack(badImage{name: "panic", what: "a panic"}, back{healthy: 60 * sec}, reb))
	s, err := figures.Read(dir, "upgrade")
	require.NoError(t, err)
	ratio := s.Ratios()
	assert.Equal(t, map[string]float64{
		"upgrade.reboot": 0, "upgrade.reboot-boot": 0, "upgrade.reboot-shutdown": 0.1, "upgrade.roll-total": 3.5, "upgrade.roll-step": 1.5,
		"upgrade.roll-back": 1.25, "upgrade.roll-gap": 4, "upgrade.reboot-gap": 2, "upgrade.back-panic": 2,
	}, ratio)
}
