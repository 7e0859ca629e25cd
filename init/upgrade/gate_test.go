package upgrade

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestGateDecide(t *testing.T) {
	t0 := time.Unix(1000, 0)
	settle, limit := 30*time.Second, 120*time.Second
	type obs struct {
		at      time.Duration
		problem string
	}
	tests := []struct {
		name    string
		seen    []obs
		want    Verdict
		wantWhy string
	}{
		{"healthy from the start, not settled yet", []obs{{0, ""}, {20 * time.Second, ""}}, KeepWaiting, ""},
		{"healthy for the settle period", []obs{{0, ""}, {30 * time.Second, ""}}, Bless, "healthy voting member for 30s"},
		{"a break restarts the settle period", []obs{{0, ""}, {25 * time.Second, "not a voting member (learner)"}, {40 * time.Second, ""}, {60 * time.Second, ""}}, KeepWaiting, ""},
		{"settled after the break", []obs{{0, ""}, {25 * time.Second, "x"}, {40 * time.Second, ""}, {70 * time.Second, ""}}, Bless, "healthy"},
		{"never healthy", []obs{{0, "etcd not started"}, {60 * time.Second, "not a voting member (learner)"}, {120 * time.Second, "not a voting member (learner)"}}, Fail, "gate failed: not a voting member (learner) after 2m0s"},
		{"healthy too late to settle", []obs{{0, "etcd not started"}, {100 * time.Second, ""}, {120 * time.Second, ""}}, Fail, "gate failed: etcd not started after 2m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Gate{Start: t0, Settle: settle, Limit: limit}
			var v Verdict
			var why string
			for _, o := range tt.seen {
				v, why = g.Decide(t0.Add(o.at), o.problem)
			}
			assert.Equal(t, tt.want, v, "verdict (%s)", why)
			assert.Contains(t, why, tt.wantWhy)
		})
	}
}
