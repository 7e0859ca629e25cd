package main

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
	"github.com/etcdbox/etcdbox/internal/kvwriter"
)

func TestRecordRoll(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(figures.DirEnv, dir)
	reb := reboots{runs: []reboot{{total: 30 * sec, kernel: 10 * sec, shutdown: 2 * sec}, {total: 40 * sec, kernel: 10 * sec, shutdown: 4 * sec}, {total: 50 * sec, kernel: 10 * sec, shutdown: 9 * sec}},
		writer: writerFigures{gap: 500 * time.Millisecond}}
	rl := roll{total: 140 * sec, steps: []step{{total: 60 * sec, back: 50 * sec}}, writer: writerFigures{gap: sec}}
	mv := moves{n: 3, writer: writerFigures{gap: 250 * time.Millisecond}, ackGap: 250 * time.Millisecond}
	fresh := freshMoves{age: 12 * sec, gaps: []time.Duration{300 * time.Millisecond, 500 * time.Millisecond, 400 * time.Millisecond}}
	require.NoError(t, recordRoll(reb, mv, fresh, rl))
	require.NoError(t, recordBack(badImage{name: "panic", what: "a panic"}, back{healthy: 60 * sec}, reb))
	s, err := figures.Read(dir, "upgrade")
	require.NoError(t, err)
	ratio := s.Ratios()
	assert.Equal(t, map[string]float64{
		"upgrade.reboot": 0, "upgrade.reboot-boot": 0, "upgrade.reboot-shutdown": 0.1, "upgrade.roll-total": 3.5, "upgrade.roll-step": 1.5,
		"upgrade.roll-back": 1.25, "upgrade.roll-gap": 4, "upgrade.reboot-gap": 2, "upgrade.back-panic": 2,
		"upgrade.fresh-move-gap": 2,
	}, ratio)
}

// TestAckGap takes the longest time between acknowledged puts, leaving
// out reads, failed tries, puts whose compare failed and the writer's
// start.
func TestAckGap(t *testing.T) {
	ms := func(d int) int64 { return int64(time.Duration(d) * time.Millisecond) }
	put := func(call, ret int, set bool) porcupine.Operation {
		return porcupine.Operation{Input: kvwriter.Input{Put: true}, Call: ms(call), Return: ms(ret), Output: kvwriter.Output{Set: set}}
	}
	hist := []porcupine.Operation{
		put(900, 1000, true), // the first ack, 1 s after the start: left out
		put(1000, 1100, true),
		{Input: kvwriter.Input{}, Call: ms(1100), Return: ms(3000), Output: kvwriter.Output{Value: 1}}, // a read
		put(1100, 1500, false), // compare failed
		{Input: kvwriter.Input{Put: true}, Call: ms(1500), Return: math.MaxInt64, Output: kvwriter.Output{Unknown: true}},
		put(1150, 1800, true), // another worker's, 700 ms after the last ack
		put(1800, 2100, true),
	}
	assert.Equal(t, 700*time.Millisecond, ackGap(hist))
	assert.Zero(t, ackGap(hist[:1]), "one ack has no gap")
}
