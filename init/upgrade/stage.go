package upgrade

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/seed"
)

// stageTimeout bounds one staging, the pull included.
const stageTimeout = 10 * time.Minute

// stage pulls ref and writes it into the slot that is not booted.
func (a *Agent) stage(ref string, hold bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), stageTimeout)
	defer cancel()
	d, err := ParseRef(ref, false)
	if err != nil {
		return err
	}
	target := slot.Other(a.Booted)
	if target == "" {
		return fmt.Errorf("booted slot %q: no other slot to stage into", a.Booted)
	}
	insecure := slices.Contains(a.Seed.InsecureRegistries, d.RegistryStr())
	// The signature first, before anything touches the slot, and on every
	// staging, a reused one too: the keys may have changed since.
	if err := a.checkSignature(ctx, ref, insecure); err != nil {
		return err
	}
	if done, err := a.reuse(target, d.DigestStr(), hold); done || err != nil {
		return err
	}
	boot, err := Fetch(ctx, ref, Options{Insecure: insecure})
	if err != nil {
		return err
	}
	a.setPhase(ref, nodeapi.PhaseWriting, "")
	return a.write(target, boot, hold)
}

// write writes boot into target, with the kernel command line of the
// booted slot (see slotOptions), and records what it wrote.
func (a *Agent) write(target string, boot *Boot, hold bool) error {
	st, err := slot.Read(a.ESP)
	if err != nil {
		return err
	}
	cur := st.Slots[a.Booted]
	if cur.Entry == nil {
		return fmt.Errorf("the booted slot %q has no entry to take the kernel command line from", a.Booted)
	}
	if a.Writing != nil {
		a.Writing(target)
	}
	if err := slot.ClearRecords(a.ESP, target); err != nil {
		return err
	}
	// The new slot boots with the booted slot's command line (Stage sets
	// its etcdbox.slot) less the extras the booted slot's image brought,
	// plus the new image's extras; those are recorded next to the slot
	// for the upgrade after this one.
	prev, err := slot.ReadRecord(a.ESP, slot.CmdlineRecord(a.Booted))
	if err != nil {
		return err
	}
	options := slotOptions(cur.Entry.Options, prev, boot.Cmdline)
	if err := slot.WriteRecord(a.ESP, slot.CmdlineRecord(target), strings.TrimSpace(boot.Cmdline)); err != nil {
		return err
	}
	e, err := slot.Stage(a.ESP, target, slot.Update{
		Kernel:  bytes.NewReader(boot.Kernel),
		Initrd:  bytes.NewReader(boot.Initrd),
		Options: options,
		Tries:   a.Seed.Tries,
		Hold:    hold,
	})
	if err != nil {
		return err
	}
	rec := slot.Image{Digest: boot.Digest, Kernel: sum(boot.Kernel), Initrd: sum(boot.Initrd)}
	if err := slot.WriteImage(a.ESP, target, rec); err != nil {
		return err
	}
	a.Logf("upgrade: %s staged in slot %s as %s (generation %d, options %q)", boot.Digest, target, e.File, e.Generation, e.Options)
	if a.Staged != nil {
		a.Staged(target, e, rec)
	}
	return nil
}

// reuse finishes a staging of digest without pulling when slot holds it
// already, never booted: a roll stages every node ahead and again at the
// node's turn, and a roll started again after an abort finds its slots
// staged. The boot files are hashed against the record first. It holds
// or arms the slot's entry as hold asks, and reports whether it did.
func (a *Agent) reuse(target, digest string, hold bool) (bool, error) {
	rec, err := slot.ReadImage(a.ESP, target)
	if err != nil || rec.Digest != digest {
		return false, err
	}
	st, err := slot.Read(a.ESP)
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
	if ok, err := a.intact(target, rec); !ok || err != nil {
		return false, err
	}
	if hold {
		_, err = slot.Hold(a.ESP, target)
	} else {
		_, err = slot.Arm(a.ESP, target)
	}
	if err != nil {
		return false, err
	}
	a.Logf("upgrade: slot %s holds %s already (%s); nothing pulled", target, digest, e.File)
	if a.Staged != nil {
		a.Staged(target, *e, rec)
	}
	return true, nil
}

// intact reports whether target's boot files hash as rec says.
func (a *Agent) intact(target string, rec slot.Image) (bool, error) {
	for _, f := range []struct{ path, want string }{{slot.KernelFile(target), rec.Kernel}, {slot.InitrdFile(target), rec.Initrd}} {
		b, err := a.ESP.ReadFile(f.path)
		if err != nil {
			return false, err
		}
		if got := sum(b); got != f.want {
			a.Logf("upgrade: %s: sha256 %s, the record says %s; staging again", f.path, got, f.want)
			return false, nil
		}
	}
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
func (a *Agent) checkSignature(ctx context.Context, ref string, insecure bool) error {
	if len(a.Seed.TrustedKeys) == 0 {
		return nil
	}
	var keys []crypto.PublicKey
	for i, pemText := range a.Seed.TrustedKeys {
		k, err := imagesig.ParsePublicKey(pemText)
		if err != nil {
			return fmt.Errorf("seed upgrade.trustedKeys[%d]: %w", i, err)
		}
		keys = append(keys, k)
	}
	d, err := ParseRef(ref, insecure)
	if err != nil {
		return err
	}
	i, err := imagesig.Verify(ctx, d, keys)
	if err != nil {
		return fmt.Errorf("image %s refused: %w", ref, err)
	}
	a.Logf("upgrade: %s is signed by trusted key %d of %d", d.DigestStr(), i+1, len(keys))
	return nil
}
