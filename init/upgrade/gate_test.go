package upgrade

import (
	"context"
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

func TestGateNext(t *testing.T) {
	t0 := time.Unix(1000, 0)
	every := 2 * time.Second
	g := &Gate{Start: t0, Settle: 10 * time.Second, Limit: time.Minute}
	if v, _ := g.Decide(t0, "etcd not started"); v != KeepWaiting {
		t.Fatalf("verdict %v", v)
	}
	assert.Equal(t, every, g.Next(t0, every), "not healthy: the usual look")
	g.Decide(t0.Add(time.Second), "")
	assert.Equal(t, every, g.Next(t0.Add(time.Second), every), "healthy, settle far off")
	g.Decide(t0.Add(9500*time.Millisecond), "")
	assert.Equal(t, 1500*time.Millisecond, g.Next(t0.Add(9500*time.Millisecond), every), "the look that may bless comes when the settle time is up")
	v, _ := g.Decide(t0.Add(11*time.Second), "")
	assert.Equal(t, Bless, v, "healthy for the settle time at that look")
	g2 := &Gate{Start: t0, Settle: 10 * time.Second, Limit: time.Minute}
	g2.Decide(t0, "")
	g2.Decide(t0.Add(9*time.Second), "etcd does not answer")
	assert.Equal(t, every, g2.Next(t0.Add(9*time.Second), every), "a break: the settle time starts again")
	g2.Decide(t0.Add(20*time.Second), "")
	assert.Equal(t, time.Duration(0), g2.Next(t0.Add(31*time.Second), every), "past due: at once")
}

func TestCrashLoop(t *testing.T) {
	tests := []struct {
		name    string
		crashes int
		served  bool
		last    string
		want    string
	}{
		{"no exit", 0, false, "", ""},
		{"fewer exits than the limit", CrashLimit - 1, false, "exit status 1", ""},
		{"exits at the limit, never served", CrashLimit, false, "exit status 1", "etcd exited 5 times in this slot and never served (last: exit status 1)"},
		{"many exits, killed by a signal", 9, false, "signal: segmentation fault", "etcd exited 9 times in this slot and never served (last: signal: segmentation fault)"},
		{"served once, then exits: the gate's usual rule", 9, true, "exit status 2", ""},
		{"no status kept", CrashLimit, false, "", "(last: unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CrashLoop(tt.crashes, tt.served, tt.last)
			if tt.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tt.want)
		})
	}
}

// TestProbationDoomed: a doomed slot fails at the next look, long before
// the gate's limit, and is never blessed; one that is not doomed is
// judged by the gate as before.
func TestProbationDoomed(t *testing.T) {
	run := func(t *testing.T, doomedAfter int, problem string) (failed string, blessed bool) {
		looks := 0
		done := make(chan struct{})
		p := Probation{
			Slot: "a", Settle: 20 * time.Millisecond, Limit: time.Hour, Every: time.Millisecond,
			Problem: func(context.Context) string { return problem },
			Doomed: func() string {
				looks++
				if doomedAfter > 0 && looks >= doomedAfter {
					return CrashLoop(CrashLimit, false, "exit status 1")
				}
				return ""
			},
			Bless: func() error { blessed = true; close(done); return nil },
			Fail:  func(why string) { failed = why; close(done) },
			Logf:  t.Logf,
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		p.Watch(ctx)
		select {
		case <-done:
		default:
			t.Fatal("the gate neither blessed nor failed the slot")
		}
		return failed, blessed
	}
	t.Run("etcd never serves: failed at once", func(t *testing.T) {
		failed, blessed := run(t, 3, "etcd does not answer")
		assert.False(t, blessed)
		assert.Equal(t, "gate failed: etcd exited 5 times in this slot and never served (last: exit status 1)", failed)
	})
	t.Run("not doomed and healthy: blessed", func(t *testing.T) {
		failed, blessed := run(t, 0, "")
		assert.True(t, blessed)
		assert.Empty(t, failed)
	})
}

// TestProbationSettlesFromTheAnswer: a look that takes its time (the
// first one waits for etcd to serve) proves health from its answer on,
// so the settle time is counted from there, not from when it began.
func TestProbationSettlesFromTheAnswer(t *testing.T) {
	const settle, slowLook = 150 * time.Millisecond, 300 * time.Millisecond
	var firstAnswer, blessedAt time.Time
	done := make(chan struct{})
	p := Probation{
		Slot: "b", Settle: settle, Limit: time.Hour, Every: time.Millisecond,
		Problem: func(context.Context) string {
			if firstAnswer.IsZero() {
				time.Sleep(slowLook) // stands for a TLS handshake that waits for etcd
				firstAnswer = time.Now()
			}
			return ""
		},
		Bless: func() error { blessedAt = time.Now(); close(done); return nil },
		Fail:  func(why string) { t.Errorf("failed: %s", why); close(done) },
		Logf:  t.Logf,
	}
	go p.Watch(t.Context())
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no verdict")
	}
	assert.GreaterOrEqual(t, blessedAt.Sub(firstAnswer), settle, "healthy for the settle time after the first healthy answer")
}
