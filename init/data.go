package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/etcdbox/etcdbox/init/storage"
	"github.com/etcdbox/etcdbox/init/supervise"
)

// prepareData finds DATA, formats it on first boot, checks it, grows it to
// the disk's end, and mounts it. DATA that is not ext4 and not the blank
// placeholder, or that e2fsck cannot preen, is reported and the node
// waits: it never formats what it did not create.
func (n *node) prepareData(ctx context.Context) error {
	rep, err := storage.PrepareData(ctx, storage.Options{
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

// runTool runs a tool of the image (supervise.RunTool) with the minimal
// environment the init gives every tool.
func runTool(name string, args ...string) ([]byte, int, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin", "LANG=C"}
	return supervise.RunTool(context.Background(), cmd)
}
