// Command upgrade prints the upgrade figures of `make bench` (issue 5), all
// from one run on one local cluster of three nodes, so that the noise of a
// shared machine hits every figure alike:
//
//   - a plain reboot of each node (node API reboot until the node is a
//     healthy voter on the same slot), the yardstick of the other figures;
//   - a rolling upgrade of the three nodes from v1 to v2 under a continuous
//     writer: the total, each node's step (snapshot and staging, then
//     reboot until blessed) and the longest time without an acknowledged
//     write, with the writer's history checked by porcupine, and their
//     ratios to the reboot;
//   - for images that cannot boot (a panicking kernel command line, an
//     initramfs without virtio_blk), the time from the bad slot's kernel
//     until the node is a healthy voter on its old slot again.
//
// Figures go to stdout, progress to stderr, and the figures also to
// bench.json (record.go). With -svg (hack/bench.sh sets $BENCH_SVG) it
// draws the roll's timeline: each put's latency over time, failed puts
// marked, and each node's phases (staging, hand-over, reboot, gate,
// blessed) as bands, timed from the roll's calls to the node APIs and
// etcd (timeline.go, svg.go). Nothing is asserted.
//
//	go run ./bench/upgrade -sysroot .cache/sysroot -etcd bin/etcd -init bin/init
package main

import (
	"context"
	"io"

	"github.com/etcdbox/etcdbox/bench/internal/benchmain"
)

func main() { benchmain.Main("bench upgrade", run) }

// run parses args, builds the images, runs the cluster and prints the
// figures to stdout; progress goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	return opts.bench(ctx, stdout, stderr)
}
