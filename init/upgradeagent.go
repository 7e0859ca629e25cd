package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/init/upgrade"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/seed"
)

// The upgrade agent: it pulls an image and writes it into the slot that
// is not booted (DESIGN §7), armed at once or held until the roll reaches
// the node (nodeapi.UpgradeRequest.Hold, slot.Arm).

func (a *apiNode) Upgrade() nodeapi.UpgradeProgress {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.progress
	if p.Phase == "" {
		p.Phase = nodeapi.PhaseIdle
	}
	return p
}

func (a *apiNode) setPhase(target, phase, errText string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.progress = nodeapi.UpgradeProgress{Target: target, Phase: phase, Error: errText, Updated: time.Now()}
	if errText != "" {
		a.n.log.Printf("upgrade %s: %s: %s", target, phase, errText)
	} else {
		a.n.log.Printf("upgrade %s: %s", target, phase)
	}
}

// busy returns ErrBusy (wrapped) while a staging is under way.
func (a *apiNode) busy() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.progress; p.Phase == nodeapi.PhasePulling || p.Phase == nodeapi.PhaseWriting {
		return fmt.Errorf("%w: staging %s", server.ErrBusy, p.Target)
	}
	return nil
}

// claim starts a staging of ref: it sets PhasePulling, unless a staging
// is under way already (of ref: running; of another: ErrBusy), in one
// step, so that two requests never stage at once.
func (a *apiNode) claim(ref string) (running bool, err error) {
	a.mu.Lock()
	p := a.progress
	if p.Phase == nodeapi.PhasePulling || p.Phase == nodeapi.PhaseWriting {
		a.mu.Unlock()
		if p.Target == ref {
			return true, nil
		}
		return true, fmt.Errorf("%w: staging %s", server.ErrBusy, p.Target)
	}
	a.progress = nodeapi.UpgradeProgress{Target: ref, Phase: nodeapi.PhasePulling, Updated: time.Now()}
	a.mu.Unlock()
	a.n.log.Printf("upgrade %s: %s", ref, nodeapi.PhasePulling)
	return false, nil
}

// checkRef parses ref and checks it against the seed's registries.
func (a *apiNode) checkRef(ref string) (string, error) {
	n := a.n
	if n.esp == "" {
		return "", fmt.Errorf("%w: no ESP mounted (container mode has no slots)", server.ErrBusy)
	}
	// The allowlist is checked here, before any network traffic, and
	// its refusal goes back to the caller, not to a background phase.
	d, err := upgrade.ParseRef(ref, false)
	if err != nil {
		return "", fmt.Errorf("%w: %w", server.ErrBadRequest, err)
	}
	if err := upgrade.CheckRegistry(d, n.seed.Upgrade.Registries); err != nil {
		n.log.Printf("upgrade: refused: %v", err)
		return "", fmt.Errorf("%w: %w", server.ErrRefused, err)
	}
	return d.DigestStr(), nil
}

// StageUpgrade pulls ref and writes it into the inactive slot in the
// background, held when hold is set. The same ref staging is accepted
// again; the digest the slot already holds, never booted, is not pulled
// again (see reuse). A ref that is not pinned by digest, or names a
// registry the seed's upgrade.registries does not list, is refused at
// once.
func (a *apiNode) StageUpgrade(_ context.Context, ref string, hold bool) error {
	if _, err := a.checkRef(ref); err != nil {
		return err
	}
	if running, err := a.claim(ref); running || err != nil {
		return err
	}
	go func() {
		err := supervise.Catch("staging of "+ref, a.n.log.Printf, func() error { return a.stage(ref, hold) })
		if err != nil {
			a.setPhase(ref, nodeapi.PhaseFailed, err.Error())
			return
		}
		if hold {
			a.setPhase(ref, nodeapi.PhaseHeld, "")
		} else {
			a.setPhase(ref, nodeapi.PhaseStaged, "")
		}
	}()
	return nil
}

// ArmUpgrade arms the held slot for its next boot, when it holds ref.
func (a *apiNode) ArmUpgrade(_ context.Context, ref string) error {
	digest, err := a.checkRef(ref)
	if err != nil {
		return err
	}
	// A staging under way removes the record first, so an arm racing
	// it finds no record, or a stage that comes after it, and is safe.
	if err := a.busy(); err != nil {
		return err
	}
	n := a.n
	target := slot.Other(n.bootedSlot())
	if target == "" {
		return fmt.Errorf("%w: booted without etcdbox.slot", server.ErrRefused)
	}
	rec, err := slot.ReadImage(n.esp, target)
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
	e, err := slot.Arm(n.esp, target)
	if err != nil {
		return fmt.Errorf("%w: %w", server.ErrRefused, err)
	}
	n.log.Printf("upgrade: %s armed in slot %s as %s (generation %d)", digest, target, e.File, e.Generation)
	a.setPhase(ref, nodeapi.PhaseStaged, "")
	return nil
}

// stage pulls ref and writes it into the slot that is not booted.
func (a *apiNode) stage(ref string, hold bool) error {
	n := a.n
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := upgrade.ParseRef(ref, false)
	if err != nil {
		return err
	}
	booted := n.bootedSlot()
	target := slot.Other(booted)
	if target == "" {
		return fmt.Errorf("booted slot %q: no other slot to stage into", booted)
	}
	insecure := false
	for _, r := range n.seed.Upgrade.InsecureRegistries {
		insecure = insecure || r == d.RegistryStr()
	}
	// The signature first, before anything touches the slot, and on every
	// staging, a reused one too: the keys may have changed since.
	if err := n.checkSignature(ctx, ref, insecure); err != nil {
		return err
	}
	if done, err := a.reuse(target, d.DigestStr(), hold); done || err != nil {
		return err
	}
	boot, err := upgrade.Fetch(ctx, ref, upgrade.Options{Insecure: insecure})
	if err != nil {
		return err
	}
	a.setPhase(ref, nodeapi.PhaseWriting, "")
	st, err := slot.Read(n.esp)
	if err != nil {
		return err
	}
	cur := st.Slots[booted]
	if cur.Entry == nil {
		return fmt.Errorf("the booted slot %q has no entry to take the kernel command line from", booted)
	}
	if err := slot.ClearRecords(n.esp, target); err != nil {
		return err
	}
	// The new slot boots with the booted slot's command line (Stage sets
	// its etcdbox.slot) less the extras the booted slot's image brought,
	// plus the new image's extras; those are recorded next to the slot
	// for the upgrade after this one.
	prev, err := slot.ReadRecord(n.esp, slot.CmdlineRecord(booted))
	if err != nil {
		return err
	}
	options := slotOptions(cur.Entry.Options, prev, boot.Cmdline)
	if err := slot.WriteRecord(n.esp, slot.CmdlineRecord(target), strings.TrimSpace(boot.Cmdline)); err != nil {
		return err
	}
	e, err := slot.Stage(n.esp, target, slot.Update{
		Kernel:  bytes.NewReader(boot.Kernel),
		Initrd:  bytes.NewReader(boot.Initrd),
		Options: options,
		Tries:   n.seed.Upgrade.Tries,
		Hold:    hold,
	})
	if err != nil {
		return err
	}
	rec := slot.Image{Digest: boot.Digest, Kernel: sum(boot.Kernel), Initrd: sum(boot.Initrd)}
	if err := slot.WriteImage(n.esp, target, rec); err != nil {
		return err
	}
	n.log.Printf("upgrade: %s staged in slot %s as %s (generation %d, options %q)", boot.Digest, target, e.File, e.Generation, e.Options)
	return nil
}

// reuse finishes a staging of digest without pulling when slot holds it
// already, never booted: a roll stages every node ahead and again at the
// node's turn, and a roll started again after an abort finds its slots
// staged. The boot files are hashed against the record first. It holds
// or arms the slot's entry as hold asks, and reports whether it did.
func (a *apiNode) reuse(target, digest string, hold bool) (bool, error) {
	n := a.n
	rec, err := slot.ReadImage(n.esp, target)
	if err != nil || rec.Digest != digest {
		return false, err
	}
	st, err := slot.Read(n.esp)
	if err != nil {
		return false, err
	}
	s := st.Slots[target]
	var e *slot.Entry
	switch {
	case s.Held != nil && s.Entry == nil:
		e = s.Held
	case s.Held == nil && s.Entry != nil && s.Entry.Untried():
		e = s.Entry
	default:
		return false, nil // booted, blessed, or a cut-short rename: stage anew
	}
	if e.Err != nil || !s.Kernel || !s.Initrd {
		return false, nil
	}
	for _, f := range []struct{ path, want string }{{slot.KernelFile(target), rec.Kernel}, {slot.InitrdFile(target), rec.Initrd}} {
		b, err := n.esp.ReadFile(f.path)
		if err != nil {
			return false, err
		}
		if got := sum(b); got != f.want {
			n.log.Printf("upgrade: %s: sha256 %s, the record says %s; staging again", f.path, got, f.want)
			return false, nil
		}
	}
	if hold {
		_, err = slot.Hold(n.esp, target)
	} else {
		_, err = slot.Arm(n.esp, target)
	}
	if err != nil {
		return false, err
	}
	n.log.Printf("upgrade: slot %s holds %s already (%s); nothing pulled", target, digest, e.File)
	return true, nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// slotOptions is the kernel command line of a slot being staged: the
// booted entry's options without the extras the booted slot's own image
// added (prev, from its slot.CmdlineRecord; each argument removed once, the
// last occurrence), then the new image's extras. Slot images built
// before images carried extras, and the raw image's first slot, have no
// record: their options are kept whole. The staged slot's etcdbox.slot is
// set by slot.Stage, which also insists on a non-zero panic=. A seed on
// the booted command line is left out (it can carry the CA key, and the
// entry's options are logged): the new slot reads the cached seed.
func slotOptions(booted, prev, extras string) string {
	fields := strings.Fields(seed.WithoutSeed(booted))
	for _, p := range strings.Fields(prev) {
		for i := len(fields) - 1; i >= 0; i-- {
			if fields[i] == p {
				fields = append(fields[:i], fields[i+1:]...)
				break
			}
		}
	}
	return strings.Join(append(fields, strings.Fields(extras)...), " ")
}

// checkSignature checks, when the seed trusts keys (upgrade.trustedKeys),
// that ref is signed by one of them (imagesig), and says which.
func (n *node) checkSignature(ctx context.Context, ref string, insecure bool) error {
	if len(n.seed.Upgrade.TrustedKeys) == 0 {
		return nil
	}
	var keys []crypto.PublicKey
	for i, pemText := range n.seed.Upgrade.TrustedKeys {
		k, err := imagesig.ParsePublicKey(pemText)
		if err != nil {
			return fmt.Errorf("seed upgrade.trustedKeys[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	d, err := upgrade.ParseRef(ref, insecure)
	if err != nil {
		return err
	}
	i, err := imagesig.Verify(ctx, d, keys)
	if err != nil {
		return fmt.Errorf("image %s refused: %w", ref, err)
	}
	n.log.Printf("upgrade: %s is signed by trusted key %d of %d", d.DigestStr(), i+1, len(keys))
	return nil
}
