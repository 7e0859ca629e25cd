package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/etcdbox/etcdbox/init/storage"
	"github.com/etcdbox/etcdbox/init/supervise"
)

// prepareData finds DATA, formats it on first boot, checks it, grows it to
// the disk's end, and mounts it. DATA that is not ext4 and not the blank
// placeholder, or that e2fsck cannot preen, is reported and the node
// waits: it never formats what it did not create.
func (n *node) prepareData(ctx context.Context) error {
	rep, err := storage.PrepareData(ctx, storage.Options{
		Wait:   dataWait(n.disksBy, time.Now()),
		Target: n.root,
		Tools:  &storage.Tools{Run: runTool},
		Logf:   n.log.Printf,
	})
	if errors.Is(err, storage.ErrUnknownData) || errors.Is(err, storage.ErrNeedsRepair) {
		return fmt.Errorf("%w: %w", err, errWait)
	}
	if err != nil {
		return err
	}
	n.mounts = append(n.mounts, n.root)
	n.log.Printf("DATA: %s, %d MiB filesystem (formatted %v, partition grown %v, filesystem grown %v)",
		rep.Dev, rep.FSBytes>>20, rep.Formatted, rep.PartitionGrown, rep.FSGrown)
	return nil
}

// diskWait is how long the boot disk has to show its partitions, from
// the moment the init first waits for one (the ESP's).
const diskWait = 30 * time.Second

// dataWait is how long prepareData waits for DATA to appear. DATA is on
// the boot disk, beside the ESP, so both share one deadline (disksBy,
// set when the ESP's wait began), not one each: a slot whose initrd
// lacks the disk's driver fails after 30 s, not 60, on its way back to
// the old slot. DATA still gets a moment (minDataWait) when the ESP
// came at the deadline, and the whole diskWait when no ESP wait ran.
func dataWait(disksBy, now time.Time) time.Duration {
	if disksBy.IsZero() {
		return diskWait
	}
	return max(disksBy.Sub(now), minDataWait)
}

// minDataWait is the least DATA is waited for.
const minDataWait = 2 * time.Second

// runTool runs a tool of the image (supervise.RunTool) with the minimal
// environment the init gives every tool.
func runTool(name string, args ...string) ([]byte, int, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin", "LANG=C"}
	return supervise.RunTool(context.Background(), cmd)
}
