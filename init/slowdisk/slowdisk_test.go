package slowdisk

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// page is a /metrics excerpt as etcd 3.7 writes it, other families around
// the histogram.
const page = `# HELP etcd_disk_backend_commit_duration_seconds The latency distributions of commit called by backend.
etcd_disk_backend_commit_duration_seconds_bucket{le="1.024"} 3
etcd_disk_backend_commit_duration_seconds_count 9
# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.
# TYPE etcd_disk_wal_fsync_duration_seconds histogram
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.128"} 1140
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.256"} 1158
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.512"} 1159
etcd_disk_wal_fsync_duration_seconds_bucket{le="1.024"} 1160
etcd_disk_wal_fsync_duration_seconds_bucket{le="2.048"} 1161
etcd_disk_wal_fsync_duration_seconds_bucket{le="+Inf"} 1162
etcd_disk_wal_fsync_duration_seconds_sum 93.4
etcd_disk_wal_fsync_duration_seconds_count 1162
`

func TestParse(t *testing.T) {
	s, err := Parse(page)
	require.NoError(t, err)
	assert.Equal(t, Syncs{All: 1162, Seconds: 93.4}, s)
	assert.Equal(t, "1162 WAL syncs of 80ms on average", s.String())

	// Prometheus writes large counts in exponent form.
	s, err = Parse("etcd_disk_wal_fsync_duration_seconds_sum 1.5e+04\netcd_disk_wal_fsync_duration_seconds_count 1.2000003e+07\n")
	require.NoError(t, err)
	assert.Equal(t, Syncs{All: 12000003, Seconds: 15000}, s)

	for _, tt := range []struct{ name, page, err string }{
		{"empty", "", "no etcd_disk_wal_fsync_duration_seconds_count and _sum on the metrics page"},
		{"no sum", "etcd_disk_wal_fsync_duration_seconds_count 5\n", "no etcd_disk_wal_fsync_duration_seconds_count and _sum on the metrics page"},
		{"count not a number", "etcd_disk_wal_fsync_duration_seconds_count five\n", `etcd_disk_wal_fsync_duration_seconds_count: "five" is not a count`},
		{"negative count", "etcd_disk_wal_fsync_duration_seconds_count -1\n", `etcd_disk_wal_fsync_duration_seconds_count: "-1" is not a count`},
		{"fractional count", "etcd_disk_wal_fsync_duration_seconds_count 1.5\n", `etcd_disk_wal_fsync_duration_seconds_count: "1.5" is not a count`},
		{"negative sum", "etcd_disk_wal_fsync_duration_seconds_sum -2\n", `etcd_disk_wal_fsync_duration_seconds_sum: "-2" is not a duration in seconds`},
		{"sum not a number", "etcd_disk_wal_fsync_duration_seconds_sum NaN\n", `etcd_disk_wal_fsync_duration_seconds_sum: "NaN" is not a duration in seconds`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.page)
			assert.EqualError(t, err, tt.err)
		})
	}
}

func TestSince(t *testing.T) {
	assert.Equal(t, Syncs{All: 10, Seconds: 2}, Syncs{All: 110, Seconds: 7}.Since(Syncs{All: 100, Seconds: 5}))
	// etcd started again: its counters begin at zero.
	assert.Equal(t, Syncs{All: 7, Seconds: 3}, Syncs{All: 7, Seconds: 3}.Since(Syncs{All: 100, Seconds: 2}))
	assert.Equal(t, Syncs{All: 50, Seconds: 0.5}, Syncs{All: 50, Seconds: 0.5}.Since(Syncs{All: 10, Seconds: 2}))
}

func TestSlowDisk(t *testing.T) {
	for _, tt := range []struct {
		w    Syncs
		slow bool
	}{
		{Syncs{All: 40, Seconds: 8}, true},      // 200 ms each: a throttled disk
		{Syncs{All: 3, Seconds: 0.15}, true},    // 50 ms each, the fewest that count
		{Syncs{All: 2, Seconds: 4}, false},      // too few to tell
		{Syncs{All: 400, Seconds: 4}, false},    // busy and fast: 10 ms each
		{Syncs{All: 100, Seconds: 4.99}, false}, // just under 50 ms
		{Syncs{}, false},
	} {
		assert.Equal(t, tt.slow, tt.w.SlowDisk(), "%s", tt.w)
	}
	assert.Equal(t, 200*time.Millisecond, Syncs{All: 40, Seconds: 8}.Mean())
	assert.Zero(t, Syncs{}.Mean())
}

func TestPick(t *testing.T) {
	leader := Syncs{All: 30, Seconds: 3.6}                                       // 120 ms each
	a := Follower{ID: 0xa, Name: "n1", Window: Syncs{All: 30, Seconds: 0.6}}     // 20 ms
	b := Follower{ID: 0xb, Name: "n2", Window: Syncs{All: 40, Seconds: 0.4}}     // 10 ms
	close := Follower{ID: 0x1, Name: "n3", Window: Syncs{All: 90, Seconds: 5.4}} // 60 ms: slow itself
	half := Follower{ID: 0x4, Name: "n7", Window: Syncs{All: 10, Seconds: 0.4}}  // 40 ms: not four times faster
	unknown := Follower{ID: 0x2, Name: "n4", Window: Syncs{All: 99, Seconds: 0}, Err: errors.New("metrics of n4: connection refused")}
	idle := Follower{ID: 0x3, Name: "n5", Window: Syncs{All: 2, Seconds: 0.002}} // too few syncs to tell

	got, ok := Pick(leader, []Follower{a, close, b, unknown, idle, half})
	require.True(t, ok)
	assert.Equal(t, "n2", got.Name, "the fastest")
	tie := b
	tie.ID, tie.Name = 0x9, "n6"
	got, ok = Pick(leader, []Follower{b, tie})
	require.True(t, ok)
	assert.Equal(t, "n6", got.Name, "the lowest ID on a tie")
	_, ok = Pick(leader, []Follower{close, unknown, idle, half})
	assert.False(t, ok, "no follower outpaces the leader: it keeps the leadership")
	_, ok = Pick(Syncs{All: 30, Seconds: 0.06}, []Follower{a, b})
	assert.False(t, ok, "a fast leader is never asked, and no follower outpaces it 4 to 1 here")
	_, ok = Pick(leader, nil)
	assert.False(t, ok)
}
