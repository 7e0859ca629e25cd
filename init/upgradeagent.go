package main

import (
	"context"

	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/upgrade"
	"github.com/etcdbox/etcdbox/nodeapi"
)

// The node API's upgrade calls go to the upgrade agent (init/upgrade).

// upgradeAgent is the node's upgrade agent, made once the ESP is mounted
// and the seed read.
func (n *node) upgradeAgent() *upgrade.Agent {
	a := &upgrade.Agent{ESP: n.esp, Booted: n.bootedSlot(), Seed: n.seed.Upgrade, Logf: n.log.Printf}
	if n.jumps != nil {
		a.Writing = n.jumps.writing
		a.Staged = func(target string, e slot.Entry, rec slot.Image) { n.jumps.preload(target, e.Options, rec) }
	}
	return a
}

func (a *apiNode) Upgrade() nodeapi.UpgradeProgress { return a.agent.Progress() }

func (a *apiNode) StageUpgrade(ctx context.Context, ref string, hold bool) error {
	return a.agent.Stage(ctx, ref, hold)
}

func (a *apiNode) ArmUpgrade(ctx context.Context, ref string) error {
	return a.agent.Arm(ctx, ref)
}
