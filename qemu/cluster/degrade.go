package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// The faults that slow a node down rather than cut it off: a slow disk,
// and lossy or slow links.

// LimitDisk slows the node's disk to l (qemu.DiskLimit): a throttled
// cloud volume, or a drive that is failing. The zero limit gives it its
// full speed back. It needs a running VM (a paused one too); the limit
// lasts until changed or until QEMU exits.
func (c *Cluster) LimitDisk(ctx context.Context, name string, l qemu.DiskLimit) error {
	if err := l.Check(); err != nil {
		return fmt.Errorf("limit-disk %s: %w", name, err)
	}
	done := "disk at full speed"
	if !l.Zero() {
		done = "disk limited to " + l.String()
	}
	return c.vmAction(ctx, name, "limit-disk", done, nil, func(vm *qemu.VM, ctx context.Context) error {
		return vm.LimitDisk(ctx, l)
	})
}

// Impair degrades the named nodes' links to the other nodes, as a flaky
// NIC or a congested path does: each frame is lost with probability loss
// and the others wait delay (vnet.Impairment). The host still reaches
// every node through its forwards at full speed. Impairing a node again
// replaces its impairment; Heal undoes them all.
func (c *Cluster) Impair(ctx context.Context, loss float64, delay time.Duration, names ...string) error {
	if len(names) == 0 {
		return fmt.Errorf("impair: no node named")
	}
	seen := map[string]bool{}
	for _, name := range names {
		if _, err := c.node(name); err != nil {
			return fmt.Errorf("impair: %w", err)
		}
		if seen[name] {
			return fmt.Errorf("impair: %s named twice", name)
		}
		seen[name] = true
	}
	if err := c.net.Impair(ctx, vnet.Impairment{Hosts: names, Loss: loss, Delay: delay}); err != nil {
		return err // it names itself "impair: "
	}
	c.cfg.Log("network: %s: links %s", strings.Join(names, ", "), impairString(loss, delay))
	return nil
}

// impairString is "20% loss, 100ms delay", leaving out a zero part.
func impairString(loss float64, delay time.Duration) string {
	var parts []string
	if loss > 0 {
		parts = append(parts, fmt.Sprintf("%g%% loss", 100*loss))
	}
	if delay > 0 {
		parts = append(parts, delay.String()+" delay")
	}
	return strings.Join(parts, ", ")
}

// impaired returns how each impaired node's links are degraded, as
// impairString says it.
func (c *Cluster) impaired(ctx context.Context) map[string]string {
	out := map[string]string{}
	st, err := c.net.Status(ctx)
	if err != nil {
		return out
	}
	for _, im := range st.Impaired {
		for _, name := range im.Hosts {
			out[name] = impairString(im.Loss, im.Delay)
		}
	}
	return out
}
