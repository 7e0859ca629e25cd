// Command figures is the machine-readable side of `make bench` for the
// shell: it records a section's figures from a script, merges the
// sections' files into bench.json, and regenerates the README's figures
// table from bench.json. Nothing is measured or asserted here.
//
//	go run ./bench/figures record -section build -key build.time -name "image build" \
//	    -value 3.35 -unit s -n 5 [-ref "2 s" -refvalue 2] [-goal "<= 2 s"]
//	go run ./bench/figures merge -dir "$BENCH_JSON_DIR" -o bench.json \
//	    -commit "$(git describe --always --dirty)" -command "hack/bench.sh"
//	go run ./bench/figures readme bench.json README.md
//
// record writes through bench/internal/figures, so it needs
// $BENCH_JSON_DIR like the Go bench programs; merge keeps the sections of
// the old bench.json that this run did not measure, each with its own
// run; readme rewrites the text between the README's
// "<!-- bench:figures begin -->" and "<!-- bench:figures end -->" lines.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/etcdbox/etcdbox/bench/internal/benchmain"
	"github.com/etcdbox/etcdbox/bench/internal/figures"
	"github.com/etcdbox/etcdbox/qemu"
)

func main() { benchmain.Main("bench figures", run) }

const usage = "usage: figures record|merge|readme [flags]; see go doc ./bench/figures"

func run(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "record":
		return record(args[1:], stderr)
	case "merge":
		return mergeCmd(args[1:], stdout, stderr)
	case "readme":
		return readme(args[1:])
	}
	return fmt.Errorf("unknown command %q; %s", args[0], usage)
}

// record records one figure of a section, for a shell script.
func record(args []string, stderr io.Writer) error {
	var f figures.Figure
	var section, ref string
	var refValue float64
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&section, "section", "", "the bench section (build)")
	fs.StringVar(&f.Key, "key", "", "the figure's stable key (build.time)")
	fs.StringVar(&f.Name, "name", "", "the figure's name for people")
	fs.Float64Var(&f.Value, "value", 0, "the value, in -unit")
	fs.StringVar(&f.Unit, "unit", "", "the unit (s, ms, MiB, x)")
	fs.StringVar(&ref, "ref", "", "what the value is compared with, measured in the same run")
	fs.Float64Var(&refValue, "refvalue", 0, "the reference's value, in -unit")
	fs.StringVar(&f.Goal, "goal", "", "issue 17's goal for the figure")
	fs.IntVar(&f.N, "n", 0, "the sample size behind a median")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if section == "" || f.Key == "" || fs.NArg() > 0 {
		return errors.New("record: want -section and -key, and no arguments")
	}
	if ref != "" {
		f = f.Ref(ref, refValue)
	}
	return figures.Record(section, f)
}

// mergeCmd merges the sections of $BENCH_JSON_DIR (or -dir) into -o.
func mergeCmd(args []string, stdout, stderr io.Writer) error {
	var dir, out string
	var r Run
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&dir, "dir", os.Getenv(figures.DirEnv), "the sections' files")
	fs.StringVar(&out, "o", "bench.json", "bench.json to write; its sections this run did not measure stay")
	fs.StringVar(&r.Commit, "commit", "unknown", "the commit measured")
	fs.StringVar(&r.Command, "command", "hack/bench.sh", "the command that measured")
	fs.StringVar(&r.Machine.Accel, "accel", "", "QEMU's accelerator, kvm or tcg (default: the one QEMU would use, $ETCDBOX_ACCEL or the cached probe)")
	fs.IntVar(&r.Machine.NProc, "nproc", runtime.NumCPU(), "the host's CPUs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if dir == "" || fs.NArg() > 0 {
		return errors.New("merge: want -dir or $" + figures.DirEnv + ", and no arguments")
	}
	r.Date = time.Now().UTC().Format(time.RFC3339)
	if r.Machine.Accel == "" {
		r.Machine.Accel = qemu.Accel()
	}
	fresh, err := readSections(dir)
	if err != nil {
		return err
	}
	old, err := readBench(out)
	if err != nil {
		return err
	}
	data, err := marshal(merge(old, r, fresh))
	if err != nil {
		return err
	}
	if err := writeFile(out, data); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bench figures: %d sections of this run in %s\n", len(fresh), out)
	return nil
}

// readme regenerates the README's figures table from bench.json.
func readme(args []string) error {
	if len(args) != 2 {
		return errors.New("readme: want BENCH_JSON README")
	}
	var b Bench
	if err := readJSON(args[0], &b); err != nil {
		return err
	}
	text, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	out, err := replaceTable(text, table(b))
	if err != nil {
		return fmt.Errorf("%s: %w", args[1], err)
	}
	return writeFile(args[1], out)
}
