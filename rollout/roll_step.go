package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// One node's turn in a roll: the step (snapshot, arm, reboot) and the
// watch of its reboot until the node is blessed or back on its old slot.

// step moves one node: snapshot, arm (staging again when the node holds
// nothing to arm), reboot, wait.
func (r *Roll) step(ctx context.Context, name string) error {
	api := r.api(name)
	ctx, cancel := context.WithTimeout(ctx, r.NodeTimeout)
	defer cancel()
	begin := r.now()
	s := &stepRecord{r: r, ctx: ctx, rec: NodeRecord{Name: name, Image: r.Image, Started: begin}}

	st, err := api.Status(ctx)
	if err != nil {
		return s.fail(StateFailed, untouched{err})
	}
	s.rec.From, s.rec.To = st.Slot, otherSlot(st.Slot)
	if s.rec.To == "" {
		return s.fail(StateFailed, fmt.Errorf("booted slot %q: no A/B slots (container mode?)", st.Slot))
	}

	s.put(StateSnapshot, "")
	snap, err := api.Snapshot(ctx)
	if err != nil {
		return s.fail(StateFailed, untouched{fmt.Errorf("snapshot: %w", err)})
	}
	s.rec.Snapshot = snap.Path
	r.logf("node %s: snapshot %s (%d bytes, revision %d)", name, snap.Path, snap.Size, snap.Revision)

	s.put(StateStaging, "")
	if err := r.arm(ctx, api, name); err != nil {
		return s.fail(StateFailed, err)
	}
	r.logf("node %s: slot %s armed after %s; rebooting", name, s.rec.To, r.now().Sub(begin).Round(time.Second))

	s.put(StateRebooting, "")
	rebootAt := r.now()
	if err := api.RebootWith(ctx, nodeapi.RebootRequest{NoKexec: r.NoKexec}); err != nil {
		return s.fail(StateFailed, fmt.Errorf("reboot: %w", err))
	}
	return r.judgeReboot(s, api, rebootAt, begin)
}

// untouched is a step's failure before it asked the node to arm its slot:
// the node runs as it did, and its turn can be taken again (rollNode).
type untouched struct{ err error }

func (u untouched) Error() string { return u.err.Error() }
func (u untouched) Unwrap() error { return u.err }

// stepRecord is one node's step as the roll records it in etcd, for the
// --status view.
type stepRecord struct {
	r   *Roll
	ctx context.Context // the step's, bounded by NodeTimeout
	rec NodeRecord
}

// put records the step's state.
func (s *stepRecord) put(state, errText string) {
	s.rec.State, s.rec.Error, s.rec.Updated = state, errText, s.r.now()
	// A record that cannot be written costs the --status view only.
	if err := s.r.Etcd.PutRecord(context.WithoutCancel(s.ctx), s.rec); err != nil {
		s.r.logf("node %s: record: %v", s.rec.Name, err)
	}
}

// fail records the step's failure and returns it, naming the node.
func (s *stepRecord) fail(state string, err error) error {
	s.put(state, err.Error())
	if errors.Is(err, context.DeadlineExceeded) && s.ctx.Err() != nil {
		err = fmt.Errorf("not done within %s: %w", s.r.NodeTimeout, err)
	}
	return fmt.Errorf("node %s: %w", s.rec.Name, err)
}

// arm arms the node's held slot for the roll's image. Staged ahead, the
// held slot is armed at once; a node whose held slot went (another image
// staged by hand, say) refuses, and is staged again here.
func (r *Roll) arm(ctx context.Context, api NodeAPI, name string) error {
	_, err := api.ArmUpgrade(ctx, r.Image)
	if err == nil {
		return nil
	}
	r.logf("node %s: arm: %v; staging again", name, err)
	if err := api.HoldUpgrade(ctx, r.Image); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	if err := r.waitStaged(ctx, name, api); err != nil {
		return err
	}
	if _, err := api.ArmUpgrade(ctx, r.Image); err != nil {
		return fmt.Errorf("arm: %w", err)
	}
	return nil
}

// judgeReboot watches the node after its reboot until it runs the new
// slot, blessed (Upgraded), or is back on the old one (RolledBack). It
// asks every Poll without waiting for the last answer (pollStatus), so
// a request that hangs while the node is down does not hold back the one
// that finds it up.
func (r *Roll) judgeReboot(s *stepRecord, api NodeAPI, rebootAt, begin time.Time) error {
	name := s.rec.Name
	last := ""
	answers := r.pollStatus(s.ctx, api)
	for {
		var a polled
		select {
		case <-s.ctx.Done():
			err := s.ctx.Err()
			if last != "" {
				err = fmt.Errorf("%w (last seen: %s)", err, last)
			}
			return s.fail(StateFailed, err)
		case a = <-answers:
		}
		out, why := Judge(a.st, a.err, s.rec.From, s.rec.To, rebootAt, r.now())
		if why != last {
			r.logf("node %s: %s", name, why)
			last = why
		}
		switch out {
		case Upgraded:
			s.put(StateDone, "")
			r.logf("node %s: done in %s (etcd %s, image %s)", name, r.now().Sub(begin).Round(time.Second), a.st.EtcdVersion, a.st.Version)
			return nil
		case RolledBack:
			s.put(StateRolledBack, why)
			return fmt.Errorf("node %s rolled back: %s", name, why)
		}
	}
}

// Bounds of pollStatus: one status request's time, and how many may be
// under way at once.
const (
	statusTimeout  = 10 * time.Second
	statusInFlight = 4
)

// polled is one status request's answer.
type polled struct {
	st  nodeapi.Status
	err error
}

// pollStatus asks api for its status every r.Poll until ctx ends, and
// sends the answers in the order the requests were made: an answer that
// comes after a later request's is dropped. It does not wait for one
// answer before the next request (up to statusInFlight at once), because
// a node that is rebooting can leave a request hanging until
// statusTimeout (a dial that nothing answers, a loopback forward to a VM
// that is down): waiting for it would notice the node up only that much
// later, a delay every rebooted node of a roll paid. The first request
// goes out after r.Poll.
func (r *Roll) pollStatus(ctx context.Context, api NodeAPI) <-chan polled {
	out := make(chan polled)
	go func() {
		type answer struct {
			seq int
			polled
		}
		// Buffered for every request that may be under way, so that
		// none blocks once this goroutine has returned.
		answers := make(chan answer, statusInFlight)
		t := time.NewTicker(r.Poll)
		defer t.Stop()
		seq, inFlight, newest := 0, 0, 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if inFlight == statusInFlight {
					continue
				}
				seq++
				inFlight++
				go func(seq int) {
					sctx, cancel := context.WithTimeout(ctx, statusTimeout)
					defer cancel()
					st, err := api.Status(sctx)
					answers <- answer{seq, polled{st, err}}
				}(seq)
			case a := <-answers:
				inFlight--
				if a.seq < newest {
					continue
				}
				newest = a.seq
				select {
				case out <- a.polled:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// waitStaged polls node name's upgrade agent until it holds Image staged
// (PhaseHeld). A node that restarted while it staged comes back with its
// agent idle, and nothing would finish the staging: it is asked again,
// which is safe, since staging the digest the slot holds already rewrites
// nothing and a half-written slot is written again from the start (the
// roll would otherwise wait out NodeTimeout, as a chaos run's kill of a
// staging node showed). A node that refuses the request (busy with
// another image, say) stops the wait with its answer; one that does not
// answer yet is asked again at the next poll.
func (r *Roll) waitStaged(ctx context.Context, name string, api NodeAPI) error {
	for {
		p, err := api.Upgrade(ctx)
		if err == nil {
			switch {
			case p.Target == r.Image && p.Phase == nodeapi.PhaseHeld:
				return nil
			case p.Target == r.Image && p.Phase == nodeapi.PhaseFailed:
				return fmt.Errorf("staging failed: %s", p.Error)
			case p.Target != r.Image || p.Phase == nodeapi.PhaseIdle:
				// The node's agent starts idle: it restarted while it
				// staged, and will not go on by itself (or someone
				// staged another image there since, and the request
				// is refused).
				r.logf("node %s: no staging of the image under way (phase %s, target %q): the node restarted, or staged another image; asking again", name, p.Phase, p.Target)
				if err := api.HoldUpgrade(ctx, r.Image); err != nil {
					var refused *nodeapi.Error
					if errors.As(err, &refused) {
						return fmt.Errorf("staging again: %w", err)
					}
					// Not answering yet: asked again at the next poll.
				}
			}
		}
		if err := r.sleep(ctx); err != nil {
			return fmt.Errorf("staging: %w", err)
		}
	}
}

func otherSlot(s string) string {
	switch s {
	case "a":
		return "b"
	case "b":
		return "a"
	}
	return ""
}
