// Command benchbuild times image.Build from prebuilt inputs and prints the
// figures hack/bench_build.sh reports: the median build time of -n raw
// builds and the initrd size, compressed and uncompressed. It leaves the
// last image at -o for the script to measure on disk. Nothing is
// asserted; the figures are for people.
//
//	go run ./image/internal/benchbuild -n 5 -o out/bench.img \
//	    -sysroot .cache/sysroot -etcd bin/etcd -init bin/init
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"time"

	"github.com/etcdbox/etcdbox/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "benchbuild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var (
		n       = flag.Int("n", 5, "number of builds")
		out     = flag.String("o", "out/bench.img", "where the last image is left")
		sysroot = flag.String("sysroot", ".cache/sysroot", "root holding the kernel, modules and systemd-boot")
		etcd    = flag.String("etcd", "bin/etcd", "etcd server binary")
		initBin = flag.String("init", "bin/init", "etcdbox init binary")
	)
	flag.Parse()
	if *n < 1 {
		return fmt.Errorf("-n %d: want at least one build", *n)
	}
	kernel, modules, err := image.FindKernel(*sysroot)
	if err != nil {
		return err
	}
	epoch, err := image.EpochFromEnv()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	cfg := image.Config{
		Kernel: kernel, Modules: modules, Etcd: *etcd, Init: *initBin,
		Bootloader: image.BootloaderPath(*sysroot), Output: *out,
		SourceDateEpoch: epoch, Version: "bench",
	}
	var times []time.Duration
	var res *image.Result
	for i := 0; i < *n; i++ {
		start := time.Now()
		if res, err = image.Build(ctx, cfg); err != nil {
			return err
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	fmt.Printf("build time (raw, median of %d): %.2fs (min %.2fs, max %.2fs)\n",
		*n, times[len(times)/2].Seconds(), times[0].Seconds(), times[len(times)-1].Seconds())
	fmt.Printf("initrd compressed:   %d bytes (%.1f MiB)\n", res.Initrd.Size, mib(res.Initrd.Size))
	fmt.Printf("initrd uncompressed: %d bytes (%.1f MiB)\n", res.Initrd.Uncompressed, mib(res.Initrd.Uncompressed))
	fmt.Printf("kernel modules:      %d\n", len(res.Initrd.Modules))
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
