// Command boot prints the boot figures of `make bench` (issue 3): the time
// from QEMU start until a linearizable etcd read succeeds, for an etcdbox
// image (mutual TLS, with the admin certificate) and for a "floor" image
// (the same kernel, modules, etcd and UEFI + systemd-boot path, with the
// minimal bench/floorinit as /init and plain http), their ratio, and the
// init's resident memory once etcd is ready, parsed from the console.
//
// A third image, nometa, is ours with the cloud metadata probe off: ours
// against it is what the probe costs a node outside any cloud.
//
// Boots alternate (ours, floor, nometa, ours, ...) and run one at a time, each on
// a fresh copy-on-write overlay of an image built once, so that the
// noise of a shared machine hits both alike. Nothing is asserted.
//
//	CGO_ENABLED=0 GOOS=linux go build -o /tmp/floorinit ./bench/floorinit
//	go run ./bench/boot -n 3 -floor-init /tmp/floorinit
package main

import (
	"context"
	"io"

	"github.com/etcdbox/etcdbox/bench/internal/benchmain"
)

func main() { benchmain.Main("bench boot", run) }

// run parses args, builds the two images, boots them and prints the
// figures to stdout; progress and console tails of failed boots go to
// stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	return opts.bench(ctx, stdout, stderr)
}
