package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/init/member"
	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/init/slowdisk"
	"github.com/etcdbox/etcdbox/init/supervise"
)

// The slow-disk handoff (init/slowdisk, DESIGN §5): every handoffPoll the
// init reads the request counters of DATA's block device
// (handoff_device.go); when they say the disk may be slow and this node's
// member leads, it reads the member's WAL sync histogram, twice a
// handoffWindow apart unless it read it at the poll before; when the syncs
// between the readings say the disk is slow, it reads the voting
// followers' histograms over followerWindow and
// moves the leadership to one whose disk keeps up. At most once per
// handoffCooldown; the seed's etcd.keepLeaderOnSlowDisk turns it off.
// A leader whose disk stays slow with no follower to take over asks the
// followers again only every handoffRetry; a reading that fails is logged
// at most every handoffCooldown.
var (
	handoffPoll     = 10 * time.Second
	handoffWindow   = 5 * time.Second
	followerWindow  = 3 * time.Second
	handoffRetry    = time.Minute
	handoffCooldown = 5 * time.Minute
)

// syncReading is one reading of the local member's WAL syncs.
type syncReading struct {
	at    time.Time
	syncs slowdisk.Syncs
}

// watchSlowDisk runs the slow-disk handoff until ctx ends.
func (n *node) watchSlowDisk(ctx context.Context) {
	if n.seed.Etcd.KeepLeaderOnSlowDisk {
		n.log.Printf("slow disk: a leader on a slow disk keeps its leadership (etcd.keepLeaderOnSlowDisk)")
		return
	}
	var (
		c        *clientv3.Client
		hc       *http.Client // kept, with its connections, across readings
		last     *supervise.Supervisor
		readings []syncReading
		moved    time.Time // the last handoff
		tried    time.Time // the last try that found no follower
		told     time.Time // the last "handed off recently" line
		failed   time.Time // the last failed reading logged
		t        = time.NewTicker(handoffPoll)
		dev      = blockWatch{path: dataBlockStat(n.root)}
	)
	defer t.Stop()
	defer func() {
		if c != nil {
			c.Close()
		}
		if hc != nil {
			hc.CloseIdleConnections()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sup := n.supervisor()
		rec, _ := recovery.Load(n.recoveryFile())
		if sup == nil || sup.Pid() == 0 || recovery.Fenced(rec) {
			readings = nil
			continue
		}
		m := n.localMember()
		if sup != last || c == nil || hc == nil {
			last, readings = sup, nil
			if c != nil {
				c.Close()
				c = nil
			}
			if hc != nil {
				hc.CloseIdleConnections()
				hc = nil
			}
			tc, err := m.tlsConfig()
			if err != nil {
				continue
			}
			// One reading is a 190 KB page: 7 ms of CPU on a fast host
			// over a new TLS connection, under 5 ms over a kept one, and
			// about 60 ms of a virtual CPU under emulation.
			hc = &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
			if c, err = m.client(); err != nil {
				continue
			}
		}
		if !dev.suspect() {
			// The device's requests were fast: neither etcd's status
			// nor its histogram is read, and a window starts afresh
			// once they are not.
			readings = nil
			continue
		}
		st, err := statusOf(ctx, c, m)
		if err != nil || st.Leader == 0 || st.Leader != st.Header.MemberId {
			readings = nil // a window counts only syncs made as leader
			continue
		}
		read := func() bool {
			now := time.Now()
			syncs, err := walSyncs(ctx, hc, "https://"+m.localHTTPAddr())
			if err != nil {
				if now.Sub(failed) >= handoffCooldown {
					n.log.Printf("slow disk: %v", err)
					failed = now
				}
				return false
			}
			readings = append(readings, syncReading{now, syncs})
			return true
		}
		if !read() {
			continue
		}
		w, span, ok := windowOf(readings, time.Now())
		if !ok {
			// The first reading since the device looked slow: the
			// window is the next handoffWindow.
			select {
			case <-ctx.Done():
				return
			case <-time.After(handoffWindow): // the window's length, not a wait for readiness
			}
			if !read() {
				continue
			}
			// Still the leader: a window counts only syncs made as
			// leader, and only the leader can move the leadership.
			if st, err = statusOf(ctx, c, m); err != nil || st.Leader != st.Header.MemberId {
				readings = nil
				continue
			}
			if w, span, ok = windowOf(readings, time.Now()); !ok {
				continue
			}
		}
		now := time.Now()
		span = span.Round(time.Second)
		readings = trimReadings(readings, now)
		if !w.SlowDisk() {
			continue
		}
		if now.Sub(moved) < handoffCooldown {
			if now.Sub(told) >= handoffCooldown {
				n.log.Printf("slow disk: this leader's disk is slow (%s in %s), and it handed off %s ago; it keeps the leadership until %s have passed",
					w, span, now.Sub(moved).Round(time.Second), handoffCooldown)
				told = now
			}
			continue
		}
		if now.Sub(tried) < handoffRetry {
			continue
		}
		if n.handOff(ctx, c, hc, st.Header.MemberId, w, span) {
			moved, readings = time.Now(), nil
		} else {
			tried = time.Now()
		}
	}
}

// statusOf asks the local member for its status.
func statusOf(ctx context.Context, c *clientv3.Client, m etcdMember) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return c.Status(ctx, "https://"+m.localClientAddr())
}

// windowOf returns the syncs since the newest reading at least
// handoffWindow old, and how long ago that was; false while there is none
// (the member has not led that long).
func windowOf(readings []syncReading, now time.Time) (slowdisk.Syncs, time.Duration, bool) {
	for i := len(readings) - 1; i >= 0; i-- {
		if now.Sub(readings[i].at) >= handoffWindow {
			return readings[len(readings)-1].syncs.Since(readings[i].syncs), now.Sub(readings[i].at), true
		}
	}
	return slowdisk.Syncs{}, 0, false
}

// trimReadings drops the readings older than the newest one a window
// starts from.
func trimReadings(readings []syncReading, now time.Time) []syncReading {
	for i := len(readings) - 1; i >= 0; i-- {
		if now.Sub(readings[i].at) >= handoffWindow {
			return readings[i:]
		}
	}
	return readings
}

// handOff reads the voting followers' syncs over followerWindow and moves
// the leadership to the one Pick chooses. It reports whether it moved.
func (n *node) handOff(ctx context.Context, c *clientv3.Client, hc *http.Client, self uint64, w slowdisk.Syncs, span time.Duration) bool {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	list, err := c.MemberList(lctx)
	cancel()
	if err != nil {
		n.log.Printf("slow disk: this leader's disk is slow (%s in %s); member list: %v", w, span, err)
		return false
	}
	type peer struct {
		slowdisk.Follower
		urls   []string
		before slowdisk.Syncs
	}
	var peers []*peer
	for _, mem := range list.Members {
		if mem.ID == self || mem.IsLearner || len(mem.ClientURLs) == 0 {
			continue
		}
		p := &peer{Follower: slowdisk.Follower{ID: mem.ID, Name: mem.Name}}
		p.urls = member.HTTPURLs(member.Member{Name: mem.Name, ClientURLs: mem.ClientURLs[:1]}, n.seed.HTTPPortOf)
		p.before, p.Err = walSyncs(ctx, hc, p.urls...)
		peers = append(peers, p)
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(followerWindow): // the followers' window, not a wait for readiness
	}
	var followers []slowdisk.Follower
	for _, p := range peers {
		if p.Err == nil {
			var now slowdisk.Syncs
			if now, p.Err = walSyncs(ctx, hc, p.urls...); p.Err == nil {
				p.Window = now.Since(p.before)
			}
		}
		followers = append(followers, p.Follower)
	}
	to, ok := slowdisk.Pick(w, followers)
	if !ok {
		n.log.Printf("slow disk: this leader's disk is slow (%s in %s), and no voting follower's disk keeps up (%s): it keeps the leadership",
			w, span, describeFollowers(followers))
		return false
	}
	n.log.Printf("slow disk: this leader's disk is slow (%s in %s); moving the leadership to %s (%s in %s)",
		w, span, to.Name, to.Window, followerWindow)
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.MoveLeader(mctx, to.ID); err != nil {
		n.log.Printf("slow disk: move the leadership to %s: %v", to.Name, err)
		return false
	}
	n.log.Printf("slow disk: %s leads now", to.Name)
	return true
}

// describeFollowers says each follower's window, or why it is unknown.
func describeFollowers(fs []slowdisk.Follower) string {
	if len(fs) == 0 {
		return "no voting followers"
	}
	s := ""
	for i, f := range fs {
		if i > 0 {
			s += "; "
		}
		if f.Err != nil {
			s += fmt.Sprintf("%s: %v", f.Name, f.Err)
		} else {
			s += fmt.Sprintf("%s: %s", f.Name, f.Window)
		}
	}
	return s
}

// walSyncs reads the WAL syncs from the /metrics page of the etcd at the
// first of urls (the base URLs of its HTTP endpoints, member.HTTPURLs)
// that answers, through hc (the node's client TLS).
func walSyncs(ctx context.Context, hc *http.Client, urls ...string) (slowdisk.Syncs, error) {
	var errs []error
	for _, u := range urls {
		s, err := walSyncsAt(ctx, hc, u)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return slowdisk.Syncs{}, errors.Join(errs...)
}

func walSyncsAt(ctx context.Context, hc *http.Client, base string) (slowdisk.Syncs, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return slowdisk.Syncs{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return slowdisk.Syncs{}, fmt.Errorf("metrics of %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return slowdisk.Syncs{}, fmt.Errorf("metrics of %s: %s", base, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return slowdisk.Syncs{}, fmt.Errorf("metrics of %s: %w", base, err)
	}
	s, err := slowdisk.Parse(string(b))
	if err != nil {
		return slowdisk.Syncs{}, fmt.Errorf("metrics of %s: %w", base, err)
	}
	return s, nil
}
