package upgrade

import (
	"context"
	"fmt"
	"time"
)

// Verdict is the health gate's answer at one moment.
type Verdict int

const (
	// KeepWaiting: neither healthy long enough nor out of time.
	KeepWaiting Verdict = iota
	// Bless: the slot passed; it is kept.
	Bless
	// Fail: the slot did not pass in time; it is rolled back.
	Fail
)

// Gate is the health gate's decision table, with what it has seen so
// far. A slot is blessed once the member has been a started, voting,
// healthy member serving linearizable reads for Settle without a break;
// it fails when that has not happened within Limit of Start, with the
// last problem seen as the reason.
type Gate struct {
	Start         time.Time
	Settle, Limit time.Duration

	healthySince time.Time // zero while not healthy
	lastProblem  string
}

// Decide takes what was seen at now: problem is "" when the member was
// healthy, or what kept it from counting as healthy.
func (g *Gate) Decide(now time.Time, problem string) (Verdict, string) {
	if problem != "" {
		g.healthySince, g.lastProblem = time.Time{}, problem
	} else if g.healthySince.IsZero() {
		g.healthySince = now
	}
	switch {
	case !g.healthySince.IsZero() && now.Sub(g.healthySince) >= g.Settle:
		return Bless, fmt.Sprintf("healthy voting member for %s", g.Settle)
	case now.Sub(g.Start) >= g.Limit:
		why := g.lastProblem
		if why == "" {
			why = "not healthy long enough"
		}
		return Fail, fmt.Sprintf("gate failed: %s after %s", why, g.Limit)
	}
	return KeepWaiting, ""
}

// Next is how long to wait before the next look, after a look at now
// that kept waiting: every, or less when the member has been healthy and
// its Settle ends sooner, so that the look that blesses comes when the
// settle time is up, not up to every later. That look is still a full
// look: a member unhealthy then is not blessed.
func (g *Gate) Next(now time.Time, every time.Duration) time.Duration {
	if g.healthySince.IsZero() {
		return every
	}
	return max(min(every, g.healthySince.Add(g.Settle).Sub(now)), 0)
}

// CrashLimit is how many times etcd may exit on its own in a slot on
// probation, without having served once, before the gate gives the slot
// up (CrashLoop).
const CrashLimit = 5

// CrashLoop says why a slot on probation can never pass its gate, or "":
// etcd exited on its own crashes times in it (the supervisor's restarts)
// and never once served, last being how it ended the last time. Such an
// etcd does not start at all (a binary that is not etcd, flags or data it
// refuses, a downgrade it was not allowed): waiting out the rest of the
// gate (five minutes by default) only keeps the node out of its cluster
// longer before it goes back to the old slot. An etcd that served even
// once in this boot is left to the gate's usual rule, since it may come
// back; so is one that exits fewer than CrashLimit times, as one that
// fails once at start for a passing cause may serve at the next try.
func CrashLoop(crashes int, served bool, last string) string {
	if served || crashes < CrashLimit {
		return ""
	}
	if last == "" {
		last = "unknown"
	}
	return fmt.Sprintf("etcd exited %d times in this slot and never served (last: %s)", crashes, last)
}

// Probation is a slot on probation, watched by its health gate (Watch).
type Probation struct {
	Slot          string
	Settle, Limit time.Duration
	// Every is how often the member is looked at; the look that may
	// bless comes sooner, when the settle time is up (Gate.Next).
	Every time.Duration
	// Problem says what keeps the member from counting as healthy, or
	// "" when it does.
	Problem func(context.Context) string
	// Doomed, when set, says why the slot can never pass however long
	// the gate waits (CrashLoop), or "": a non-empty answer fails the
	// gate at the next look.
	Doomed func() string
	// Bless keeps the slot; an error is logged and tried again at the
	// next look.
	Bless func() error
	// Fail rolls the slot back, why being the reason.
	Fail func(why string)
	Logf func(format string, args ...any)
}

// Watch runs the gate until the slot is blessed or failed, or ctx ends.
func (p Probation) Watch(ctx context.Context) {
	p.Logf("gate: slot %s is on probation: bless after %s healthy, roll back after %s", p.Slot, p.Settle, p.Limit)
	g := &Gate{Start: time.Now(), Settle: p.Settle, Limit: p.Limit}
	wait := p.Every
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = p.Every
		if p.Doomed != nil {
			if why := p.Doomed(); why != "" {
				p.Fail("gate failed: " + why)
				return
			}
		}
		// The time is taken once the look has answered: a look that
		// waited (for etcd to serve, in its TLS handshake) proves health
		// only from its answer on, and a settle time counted from its
		// start came out short by that wait (2.6 s in a roll).
		problem := p.Problem(ctx)
		now := time.Now()
		v, why := g.Decide(now, problem)
		switch v {
		case Bless:
			if err := p.Bless(); err != nil {
				p.Logf("gate: %v", err)
				continue
			}
			p.Logf("slot %s blessed: %s", p.Slot, why)
			return
		case Fail:
			p.Fail(why)
			return
		}
		wait = g.Next(now, p.Every)
	}
}
