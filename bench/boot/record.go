package main

import (
	"github.com/etcdbox/etcdbox/bench/internal/figures"
	"github.com/etcdbox/etcdbox/bench/internal/stats"
)

// record records the printed figures for bench.json
// (bench/internal/figures): ours against the floor image, QEMU start and
// /init to healthy, the init's rss once etcd is ready, and the cloud
// metadata probe's cost against nometa. A figure whose sample is empty
// (every boot of an image failed) is left out.
func record(by map[string]summary) error {
	ours, floor, nometa := by["ours"], by["floor"], by["nometa"]
	var figs []figures.Figure
	add := func(key, name string, s stats.Summary, unit, goal string, ref string, r stats.Summary) {
		if s.N == 0 {
			return
		}
		f := figures.Figure{Key: key, Name: name, Value: s.Median, Unit: unit, N: s.N, Goal: goal}
		if ref != "" && r.N > 0 {
			f = f.Ref(ref, r.Median)
		}
		figs = append(figs, f)
	}
	add("boot.healthy", "boot to healthy: QEMU start to a linearizable read", ours.healthy, "s", "", "the floor image", floor.healthy)
	add("boot.init-healthy", "/init to healthy, ours vs floor", ours.after, "s", "<= 1.1x", "the floor image", floor.after)
	add("boot.kernel-at", "QEMU start to the kernel (firmware and systemd-boot)", ours.kernel, "s", "off the upgrade path", "", stats.Summary{})
	rss := stats.Summary{N: ours.rss.N, Median: ours.rss.Median / 1024}
	add("boot.init-rss", "init's RSS once etcd is ready", rss, "MiB", "<= 15 MiB", "", stats.Summary{})
	if ours.pss.N > 0 {
		pss := stats.Summary{N: ours.pss.N, Median: ours.pss.Median / 1024}
		add("boot.init-pss", "init's PSS once etcd is ready (pages shared with etcd counted half)", pss, "MiB", "", "its RSS", rss)
	}
	if nometa.healthy.N > 0 {
		add("boot.probe", "boot to healthy with the cloud metadata probe, outside any cloud", ours.healthy, "s", "", "the probe off (nometa)", nometa.healthy)
	}
	return figures.Record("boot", figs...)
}
