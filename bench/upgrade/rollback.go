package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/rollout"
)

// back is what one way back from a bad slot measured.
type back struct {
	node     string
	old, bad string // slots
	// kernel is the time from the reboot request until the bad slot's
	// kernel starts. The rest count from that kernel's first line: until
	// the console shows the failure (0 when it shows none), the old
	// slot's kernel, its "etcd ready", and until the node API says
	// healthy voter on the old slot.
	kernel, failed, oldKernel, etcdReady, healthy time.Duration
	// badState is the bad slot's state afterwards, reason the node's
	// LastRollback.
	badState, reason string
}

// rollback stages the bad image b on node through the node API, reboots the
// node into it and follows the console and the node API until the node is
// back on its old slot: systemd-boot's one try is spent, the firmware boots
// the old entry.
func (r *rig) rollback(ctx context.Context, node string, b badImage, stdout io.Writer) (back, error) {
	out := back{node: node}
	api := r.apis[node]
	vm, err := r.c.VM(node)
	if err != nil {
		return out, err
	}
	if out.old, out.bad, err = r.stageBad(ctx, api, b); err != nil {
		return out, err
	}

	ctx, cancel := context.WithTimeout(ctx, backDeadline)
	defer cancel()
	badBoot, err := r.rebootAndFallBack(ctx, vm, api, b, &out)
	if err != nil {
		return out, err
	}
	st, healthy, err := r.waitHealthyVoter(ctx, api, out.old, badBoot)
	if err != nil {
		return out, err
	}
	out.healthy = healthy
	if i := slices.IndexFunc(st.Slots, func(s nodeapi.Slot) bool { return s.Name == out.bad }); i >= 0 {
		out.badState = st.Slots[i].State
	}
	out.reason = st.LastRollback
	return out, nil
}

// stageBad pushes the bad image b to the cluster's registry and, once the
// cluster is ready, stages it on the node behind api. It returns the
// node's booted slot and the slot staged, now trying.
func (r *rig) stageBad(ctx context.Context, api *nodeapi.Client, b badImage) (old, bad string, err error) {
	img, err := tarball.ImageFromPath(b.path, nil)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", b.path, err)
	}
	ref, err := r.c.Push(ctx, img)
	if err != nil {
		return "", "", fmt.Errorf("push %s: %w", b.path, err)
	}
	if _, err := r.waitReady(ctx); err != nil {
		return "", "", err
	}
	st, err := api.Status(ctx)
	if err != nil {
		return "", "", err
	}
	old = st.Slot
	if err := r.stage(ctx, api, ref); err != nil {
		return "", "", err
	}
	if st, err = api.Status(ctx); err != nil {
		return "", "", err
	}
	i := slices.IndexFunc(st.Slots, func(s nodeapi.Slot) bool { return s.State == nodeapi.SlotTrying })
	if i < 0 {
		return "", "", fmt.Errorf("staged, but no slot is trying: %+v", st.Slots)
	}
	return old, st.Slots[i].Name, nil
}

// rebootAndFallBack reboots the node into the bad slot out.bad and follows
// its console until the firmware has booted the old slot out.old again and
// etcd is ready there. It records the times in out and returns when the
// bad slot's kernel started, which they count from.
func (r *rig) rebootAndFallBack(ctx context.Context, vm *qemu.VM, api *nodeapi.Client, b badImage, out *back) (badBoot time.Time, err error) {
	mark := vm.Mark()
	start := time.Now()
	if err := api.Reboot(ctx); err != nil {
		return badBoot, err
	}
	m, err := vm.WaitConsole(ctx, mark, kernelMarker)
	if err != nil {
		return badBoot, fmt.Errorf("waiting for the bad slot's kernel: %w", err)
	}
	badBoot = time.Now()
	out.kernel = badBoot.Sub(start)
	if !strings.Contains(m.Line, "etcdbox.slot="+out.bad) || !strings.Contains(m.Line, b.cmdline) {
		return badBoot, fmt.Errorf("the reboot did not start slot %s with %q: %s", out.bad, b.cmdline, qemu.Printable(m.Line))
	}
	// The failure line, or the next kernel when the bad boot printed none.
	f, err := vm.WaitConsole(ctx, m.Next, append(slices.Clone(b.failure), kernelMarker)...)
	if err != nil {
		return badBoot, fmt.Errorf("waiting for the bad slot to fail: %w", err)
	}
	if f.Text != kernelMarker {
		out.failed = time.Since(badBoot)
		r.log("%s: bad slot %s fails after %s: %s", out.node, out.bad, secs(out.failed), qemu.Printable(f.Line))
		if f, err = vm.WaitConsole(ctx, f.Next, kernelMarker); err != nil {
			return badBoot, fmt.Errorf("waiting for the old slot's kernel: %w", err)
		}
	}
	out.oldKernel = time.Since(badBoot)
	if !strings.Contains(f.Line, "etcdbox.slot="+out.old) {
		return badBoot, fmt.Errorf("the firmware did not boot the old slot %s next: %s", out.old, qemu.Printable(f.Line))
	}
	if _, err := vm.WaitConsole(ctx, f.Next, "etcdbox: etcd ready"); err != nil {
		return badBoot, fmt.Errorf("waiting for etcd on the old slot: %w", err)
	}
	out.etcdReady = time.Since(badBoot)
	return badBoot, nil
}

// waitHealthyVoter polls the node API until rollout.Judge finds the node a
// healthy voter on slot, rebooted at badBoot. It returns the last status
// and the time from badBoot until then.
func (r *rig) waitHealthyVoter(ctx context.Context, api *nodeapi.Client, slot string, badBoot time.Time) (nodeapi.Status, time.Duration, error) {
	for {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := api.Status(sctx)
		scancel()
		o, why := rollout.Judge(st, err, slot, slot, badBoot, time.Now())
		if o == rollout.Upgraded {
			return st, time.Since(badBoot), nil
		}
		if err := sleep(ctx, r.poll); err != nil {
			return st, 0, fmt.Errorf("waiting for a healthy voter on slot %s: %w (last seen: %s)", slot, err, why)
		}
	}
}

// stage asks the node to stage ref and waits until it has.
func (r *rig) stage(ctx context.Context, api *nodeapi.Client, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, stageDeadline)
	defer cancel()
	if err := api.StageUpgrade(ctx, ref); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	for {
		p, err := api.Upgrade(ctx)
		if err == nil && p.Target == ref {
			switch p.Phase {
			case nodeapi.PhaseStaged:
				return nil
			case nodeapi.PhaseFailed:
				return fmt.Errorf("staging failed: %s", p.Error)
			}
		}
		if err := sleep(ctx, r.poll); err != nil {
			return fmt.Errorf("staging: %w (phase %s)", err, p.Phase)
		}
	}
}
