package upgrade

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/seed"
)

// Agent stages images into the slot that is not booted, one at a time,
// armed at once or held until the roll reaches the node
// (nodeapi.UpgradeRequest.Hold, slot.Arm). Its errors wrap the node API's
// server.ErrBadRequest, ErrRefused and ErrBusy, so the API answers them
// as such.
type Agent struct {
	// ESP is the mounted ESP; "" (container mode) has no slots, and
	// every request is refused.
	ESP slot.Dir
	// Booted is the slot the node booted from (slot.Booted); "" when the
	// kernel command line names none.
	Booted string
	// Seed is the seed's upgrade section: the registries allowed and
	// reached over plain HTTP, the keys trusted, the tries of a new slot.
	Seed seed.Upgrade
	// Logf logs to the console.
	Logf func(format string, args ...any)
	// Writing, when set, is called before a staging changes the files
	// of slot target; Staged once a staging has left target complete,
	// written or found intact (reuse), with its entry and the record of
	// its boot files, before the staging reports the slot held or
	// staged. The init loads the slot's kernel for its kexec there,
	// ahead of the reboot (init/jumpload.go).
	Writing func(target string)
	Staged  func(target string, e slot.Entry, rec slot.Image)

	mu       sync.Mutex
	progress nodeapi.UpgradeProgress
}

// Progress is the staging's phase, as the node API reports it.
func (a *Agent) Progress() nodeapi.UpgradeProgress {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.progress
	if p.Phase == "" {
		p.Phase = nodeapi.PhaseIdle
	}
	return p
}

func (a *Agent) setPhase(target, phase, errText string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.progress = nodeapi.UpgradeProgress{Target: target, Phase: phase, Error: errText, Updated: time.Now()}
	if errText != "" {
		a.Logf("upgrade %s: %s: %s", target, phase, errText)
	} else {
		a.Logf("upgrade %s: %s", target, phase)
	}
}

// staging is the error of a staging under way, or nil.
func staging(p nodeapi.UpgradeProgress) error {
	if p.Phase == nodeapi.PhasePulling || p.Phase == nodeapi.PhaseWriting {
		return fmt.Errorf("%w: staging %s", server.ErrBusy, p.Target)
	}
	return nil
}

// claim starts a staging of ref: it sets PhasePulling, unless a staging
// is under way already (of ref: running; of another: ErrBusy), in one
// step, so that two requests never stage at once.
func (a *Agent) claim(ref string) (running bool, err error) {
	a.mu.Lock()
	p := a.progress
	if err := staging(p); err != nil {
		a.mu.Unlock()
		if p.Target == ref {
			return true, nil
		}
		return true, err
	}
	a.progress = nodeapi.UpgradeProgress{Target: ref, Phase: nodeapi.PhasePulling, Updated: time.Now()}
	a.mu.Unlock()
	a.Logf("upgrade %s: %s", ref, nodeapi.PhasePulling)
	return false, nil
}

// checkRef parses ref and checks it against the seed's registries, and
// returns its digest.
func (a *Agent) checkRef(ref string) (string, error) {
	if a.ESP == "" {
		return "", fmt.Errorf("%w: no ESP mounted (container mode has no slots)", server.ErrBusy)
	}
	// The allowlist is checked here, before any network traffic, and
	// its refusal goes back to the caller, not to a background phase.
	d, err := ParseRef(ref, false)
	if err != nil {
		return "", fmt.Errorf("%w: %w", server.ErrBadRequest, err)
	}
	if err := CheckRegistry(d, a.Seed.Registries); err != nil {
		a.Logf("upgrade: refused: %v", err)
		return "", fmt.Errorf("%w: %w", server.ErrRefused, err)
	}
	return d.DigestStr(), nil
}

// Stage pulls ref and writes it into the inactive slot in the
// background, held when hold is set. The same ref staging is accepted
// again; the digest the slot already holds, never booted, is not pulled
// again (see reuse). A ref that is not pinned by digest, or names a
// registry the seed's upgrade.registries does not list, is refused at
// once. A panic while staging fails that staging, not the init.
func (a *Agent) Stage(_ context.Context, ref string, hold bool) error {
	if _, err := a.checkRef(ref); err != nil {
		return err
	}
	if running, err := a.claim(ref); running || err != nil {
		return err
	}
	go func() {
		err := supervise.Catch("staging of "+ref, a.Logf, func() error { return a.stage(ref, hold) })
		switch {
		case err != nil:
			a.setPhase(ref, nodeapi.PhaseFailed, err.Error())
		case hold:
			a.setPhase(ref, nodeapi.PhaseHeld, "")
		default:
			a.setPhase(ref, nodeapi.PhaseStaged, "")
		}
	}()
	return nil
}

// Arm arms the held slot for its next boot, when it holds ref.
func (a *Agent) Arm(_ context.Context, ref string) error {
	digest, err := a.checkRef(ref)
	if err != nil {
		return err
	}
	// A staging under way removes the record first, so an arm racing
	// it finds no record, or a stage that comes after it, and is safe.
	if err := staging(a.Progress()); err != nil {
		return err
	}
	target := slot.Other(a.Booted)
	if target == "" {
		return fmt.Errorf("%w: booted without etcdbox.slot", server.ErrRefused)
	}
	rec, err := slot.ReadImage(a.ESP, target)
	if err != nil {
		return err
	}
	if rec.Digest != digest {
		holds := rec.Digest
		if holds == "" {
			holds = "no staged image"
		}
		return fmt.Errorf("%w: slot %s holds %s, not %s; stage it first", server.ErrRefused, target, holds, digest)
	}
	e, err := slot.Arm(a.ESP, target)
	if err != nil {
		return fmt.Errorf("%w: %w", server.ErrRefused, err)
	}
	a.Logf("upgrade: %s armed in slot %s as %s (generation %d)", digest, target, e.File, e.Generation)
	a.setPhase(ref, nodeapi.PhaseStaged, "")
	return nil
}
