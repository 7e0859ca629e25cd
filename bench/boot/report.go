package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/etcdbox/etcdbox/bench/internal/stats"
	"github.com/etcdbox/etcdbox/qemu"
)

// bench builds the images, runs the alternating boots and prints the
// figures. It fails when a boot failed, after printing what it has.
func (o options) bench(ctx context.Context, stdout, stderr io.Writer) error {
	dir := o.workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "etcdbox-bench-boot-")
		if err != nil {
			return err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(stderr, "bench boot: work directory %s is kept\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	t := time.Now()
	im, err := o.buildImages(ctx, dir)
	if err != nil {
		return err
	}
	vs, err := variants(im)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "images (ours + floor) built in %.1fs; qemu accel %s, %d vCPU, %d MiB; %d boots each, alternating\n",
		time.Since(t).Seconds(), qemu.Accel(), o.cpus, o.memoryMiB, o.boots)

	var samples []sample
	failed := 0
	for round := 1; round <= o.boots; round++ {
		for _, v := range vs {
			if err := ctx.Err(); err != nil {
				return err
			}
			s := o.boot(ctx, v, round, filepath.Join(dir, "vm", fmt.Sprintf("%d-%s", round, v.name)))
			if s.err != nil {
				failed++
				fmt.Fprintf(stderr, "bench boot: %v\n", s.err)
				continue
			}
			fmt.Fprintf(stderr, "  boot %d %-5s healthy %5.1fs  kernel at %s  /init at %s  init rss %s\n",
				round, v.name, s.healthy.Seconds(), secs(s.kernel), secs(s.init), kib(s.rssKiB))
			samples = append(samples, s)
		}
	}
	report(stdout, samples)
	if err := record(summarise(samples)); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d boots failed", failed, o.boots*len(vs))
	}
	return nil
}

// report prints one row per image and the ratios of the medians:
//
//	boot to healthy: QEMU start to the first linearizable read
//	kernel at:       QEMU start to the EFI stub's line (firmware + systemd-boot)
//	/init at:        QEMU start to the kernel running /init
//	/init->healthy:  healthy minus /init, per boot: the part the init changes
func report(w io.Writer, samples []sample) {
	by := summarise(samples)
	ours, floor, nometa := by["ours"], by["floor"], by["nometa"]
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "image\tboot to healthy: median (min, max)\tkernel at\t/init at\t/init->healthy\tinit rss at ready")
	for _, r := range []struct {
		name string
		f    summary
		rss  string
	}{{"ours", ours, ours.rss.Format("%.0f KiB")}, {"floor", floor, "-"}, {"nometa", nometa, nometa.rss.Format("%.0f KiB")}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.name, r.f.healthy.Format("%.1fs"),
			median(r.f.kernel), median(r.f.init), r.f.after.Format("%.1fs"), r.rss)
	}
	tw.Flush()
	fmt.Fprintf(w, "ratio ours/floor, boot to healthy (medians): %s\n", stats.Ratio(ours.healthy, floor.healthy))
	fmt.Fprintf(w, "ratio ours/floor, /init->healthy (medians):  %s\n", stats.Ratio(ours.after, floor.after))
	fmt.Fprintf(w, "init rss once etcd is ready: %s\n", ours.rss.Format("%.0f KiB"))
	if ours.pss.N > 0 {
		fmt.Fprintf(w, "init pss once etcd is ready (pages shared with etcd counted half): %s\n", ours.pss.Format("%.0f KiB"))
	}
	if nometa.healthy.N > 0 {
		fmt.Fprintf(w, "cloud metadata probe outside any cloud: ours/nometa, boot to healthy (medians): %s; %s\n",
			stats.Ratio(ours.healthy, nometa.healthy), probeCost(ours.after, nometa.after))
	}
}

// summary is one image's boots summarised: boot to healthy, kernel at,
// /init at, /init->healthy (seconds) and the init's rss and pss at ready
// (KiB).
type summary struct{ healthy, kernel, init, after, rss, pss stats.Summary }

// summarise summarises the samples of each image by its name.
func summarise(samples []sample) map[string]summary {
	by := map[string]summary{}
	for _, name := range []string{"ours", "floor", "nometa"} {
		var healthy, kernel, start, after []time.Duration
		var rss, pss []float64
		for _, s := range samples {
			if s.variant != name {
				continue
			}
			healthy = append(healthy, s.healthy)
			if s.kernel > 0 {
				kernel = append(kernel, s.kernel)
			}
			if s.init > 0 {
				start = append(start, s.init)
				after = append(after, s.healthy-s.init)
			}
			if s.rssKiB >= 0 {
				rss = append(rss, float64(s.rssKiB))
			}
			if s.pssKiB >= 0 {
				pss = append(pss, float64(s.pssKiB))
			}
		}
		by[name] = summary{stats.Durations(healthy), stats.Durations(kernel), stats.Durations(start), stats.Durations(after), stats.Of(rss), stats.Of(pss)}
	}
	return by
}

// probeCost is the difference of the /init->healthy medians: what the
// probe adds to a boot.
func probeCost(with, without stats.Summary) string {
	if with.N == 0 || without.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("/init->healthy %+.1fs", with.Median-without.Median)
}

func median(s stats.Summary) string {
	if s.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fs", s.Median)
}

func secs(d time.Duration) string {
	if d == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func kib(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return strconv.FormatInt(n, 10) + " KiB"
}
