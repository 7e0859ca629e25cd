// Command benchbuild times image.Build from prebuilt inputs and prints the
// figures hack/bench_build.sh reports: the time of a raw build whose
// initrd members the zstd program compresses (a cold cache), the median
// build time of -n raw builds that take them from the cache, and the
// initrd size, compressed and uncompressed; with -formats, each other
// format's median time as a ratio to raw's (built in the same rounds) and
// its size. Each round also builds raw with the fast initrd compression
// and with the built-in encoder's best (--zstd none), the references for
// the default's time and size. It leaves the last image at -o for the
// script to measure on disk. Nothing is asserted; the figures are for
// people.
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
	"strings"
	"syscall"
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
		etcd    = flag.String("etcd", "", "etcd server binary (empty: the init's own)")
		initBin = flag.String("init", "bin/init", "etcdbox init binary")
		formats = flag.String("formats", "", "other formats to build beside raw in each round, comma-separated (qcow2,vhd,gce,vmdk,oci)")
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
	cache, err := os.MkdirTemp("", "benchbuild-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	cfg := image.Config{
		Kernel: kernel, Modules: modules, Etcd: *etcd, Init: *initBin,
		Bootloader: image.BootloaderPath(*sysroot), Output: *out,
		SourceDateEpoch: epoch, Version: "bench", CacheDir: cache,
	}
	// The cold build: the cache is empty, so the zstd program compresses
	// every member. It fills the cache for the rounds.
	start := time.Now()
	coldRes, err := image.Build(ctx, cfg)
	if err != nil {
		return fmt.Errorf("build (cold cache): %w", err)
	}
	cold := time.Since(start)
	kinds, err := parseFormats(*formats)
	if err != nil {
		return err
	}
	// Round-robin: each round builds every format once, so that the
	// machine's noise falls on all of them alike and the ratios hold.
	times := map[image.Format][]time.Duration{}
	paths := map[image.Format]string{}
	var res, fastRes, builtinRes *image.Result
	var fastTimes, builtinTimes []time.Duration
	for i := 0; i < *n; i++ {
		c := cfg
		c.Output, c.Compression = *out+".fast", image.CompressionFast
		start := time.Now()
		r, err := image.Build(ctx, c)
		if err != nil {
			return fmt.Errorf("build --compression fast: %w", err)
		}
		fastTimes = append(fastTimes, time.Since(start))
		fastRes = r
		os.Remove(c.Output)
		c = cfg
		c.Output, c.Zstd = *out+".builtin", image.ZstdNone
		start = time.Now()
		if builtinRes, err = image.Build(ctx, c); err != nil {
			return fmt.Errorf("build --zstd none: %w", err)
		}
		builtinTimes = append(builtinTimes, time.Since(start))
		os.Remove(c.Output)
		for _, f := range kinds {
			c := cfg
			c.Format = f
			if f != image.FormatRaw {
				c.Output = *out + "." + string(f) + formatExt[f]
			}
			paths[f] = c.Output
			start := time.Now()
			r, err := image.Build(ctx, c)
			if err != nil {
				return fmt.Errorf("build --format %s: %w", f, err)
			}
			times[f] = append(times[f], time.Since(start))
			if f == image.FormatRaw {
				res = r
			}
		}
	}
	raw := median(times[image.FormatRaw])
	builtin := median(builtinTimes)
	fmt.Printf("initrd compressor: %s\n", coldRes.Initrd.Compressor)
	fmt.Printf("build time (raw, cold cache): %.2fs; cold / built-in encoder (--zstd none, median of %d, %.2fs) %.2fx\n",
		cold.Seconds(), *n, builtin.Seconds(), cold.Seconds()/builtin.Seconds())
	fmt.Printf("build time (raw, median of %d): %.2fs (min %.2fs, max %.2fs); members from the cache: %d of %d\n",
		*n, raw.Seconds(), slices.Min(times[image.FormatRaw]).Seconds(), slices.Max(times[image.FormatRaw]).Seconds(),
		count(res.Initrd.Cached), len(res.Initrd.Cached))
	fast := median(fastTimes)
	fmt.Printf("build time (raw, --compression fast, median of %d): %.2fs (min %.2fs, max %.2fs); default / fast %.2fx\n",
		*n, fast.Seconds(), slices.Min(fastTimes).Seconds(), slices.Max(fastTimes).Seconds(), raw.Seconds()/fast.Seconds())
	if len(kinds) > 1 {
		fmt.Printf("%-6s %10s %8s %14s %14s\n", "format", "median", "vs raw", "size", "allocated")
		for _, f := range kinds {
			size, alloc := fileSizes(paths[f])
			m := median(times[f])
			fmt.Printf("%-6s %9.2fs %7.2fx %10.1f MiB %10.1f MiB\n", f, m.Seconds(), m.Seconds()/raw.Seconds(), mib(size), mib(alloc))
		}
		for _, f := range kinds {
			if f != image.FormatRaw {
				os.RemoveAll(paths[f])
			}
		}
	}
	fmt.Printf("initrd compressed:   %d bytes (%.1f MiB)\n", res.Initrd.Size, mib(res.Initrd.Size))
	fmt.Printf("initrd compressed (--compression fast): %d bytes (%.1f MiB); default / fast %.2fx\n",
		fastRes.Initrd.Size, mib(fastRes.Initrd.Size), float64(res.Initrd.Size)/float64(fastRes.Initrd.Size))
	fmt.Printf("initrd compressed (--zstd none): %d bytes (%.1f MiB); default / built-in %.2fx\n",
		builtinRes.Initrd.Size, mib(builtinRes.Initrd.Size), float64(res.Initrd.Size)/float64(builtinRes.Initrd.Size))
	fmt.Printf("initrd uncompressed: %d bytes (%.1f MiB)\n", res.Initrd.Uncompressed, mib(res.Initrd.Uncompressed))
	fmt.Printf("kernel modules:      %d\n", len(res.Initrd.Modules))
	return nil
}

// formatExt is the file name ending each format's output gets.
var formatExt = map[image.Format]string{image.FormatOCI: ".tar", image.FormatGCE: ".tar.gz"}

// parseFormats reads -formats: raw always comes first, as the reference.
func parseFormats(list string) ([]image.Format, error) {
	kinds := []image.Format{image.FormatRaw}
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == string(image.FormatRaw) {
			continue
		}
		if !slices.Contains(image.Formats, image.Format(f)) {
			return nil, fmt.Errorf("-formats: %q is not one of %s", f, image.FormatNames())
		}
		kinds = append(kinds, image.Format(f))
	}
	return kinds, nil
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// fileSizes is a file's apparent size and the bytes it allocates.
func fileSizes(path string) (size, alloc int64) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		alloc = st.Blocks * 512
	}
	return fi.Size(), alloc
}

// count is how many of b are true.
func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
