package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/bench/load"
)

// fillClients write the key space before the points.
const fillClients = 32

// clusterRun is what one cluster measured.
type clusterRun struct {
	name    string
	upTook  time.Duration
	results []load.Result
	// perf are etcdctl check perf's result lines (PASS/FAIL), perfOps
	// the throughput it reports (0 when not run or not read), perfErr
	// why it failed to run.
	perf    []string
	perfOps float64
	perfErr error
}

// measure runs the load on the paused targets in turn, each resumed
// only for its share: it fills each one's key space, runs every point
// o.rounds times, the cluster that goes first rotating, then etcdctl
// check perf on each. It leaves them paused.
func (o options) measure(ctx context.Context, targets []*target, logf func(string, ...any)) ([]clusterRun, error) {
	runs := make([]clusterRun, len(targets))
	clis := make([][]*clientv3.Client, len(targets))
	defer func() {
		for _, c := range clis {
			for _, cli := range c {
				cli.Close()
			}
		}
	}()
	points := o.points()
	for i, t := range targets {
		runs[i] = clusterRun{name: t.name, upTook: t.upTook, results: make([]load.Result, len(points))}
		err := o.turn(ctx, t, func() error {
			start := time.Now()
			fill := load.Config{
				Endpoints: t.endpoints, TLS: t.tls, Clients: fillClients,
				KeySpace: o.keys, ValueSize: o.valueSize, Timeout: o.requestTimeout,
			}
			var err error
			// The connections stay up from point to point, paused with
			// the VMs, so no point pays for their handshakes.
			if clis[i], err = load.Dial(ctx, fill, o.conns); err != nil {
				return err
			}
			if err := load.FillClients(ctx, fill, clis[i]); err != nil {
				return err
			}
			logf("%s: wrote %d keys in %s", t.name, o.keys, time.Since(start).Round(100*time.Millisecond))
			return nil
		})
		if err != nil {
			return runs, err
		}
	}
	turn := 0
	for round := range o.rounds {
		for pi, p := range points {
			for k := range targets {
				i := (turn + k) % len(targets)
				t := targets[i]
				err := o.turn(ctx, t, func() error {
					p.Endpoints, p.TLS, p.Timeout = t.endpoints, t.tls, o.requestTimeout
					res, err := load.RunClients(ctx, p, clis[i])
					if err != nil {
						return err
					}
					logf("%s: round %d: %s", t.name, round+1, res)
					runs[i].results[pi].Add(res)
					return nil
				})
				if err != nil {
					return runs, err
				}
			}
			turn++
		}
	}
	if o.checkPerf != "" {
		for i, t := range targets {
			err := o.turn(ctx, t, func() error {
				runs[i].perf, runs[i].perfOps, runs[i].perfErr = o.etcdctlCheckPerf(ctx, t)
				logf("%s: etcdctl check perf: %s", t.name, strings.Join(runs[i].perf, "; "))
				return nil
			})
			if err != nil {
				return runs, err
			}
		}
	}
	return runs, nil
}

// turn resumes t, runs f, and pauses t again.
func (o options) turn(ctx context.Context, t *target, f func() error) error {
	if err := t.resume(ctx); err != nil {
		return err
	}
	ferr := f()
	if err := t.pause(ctx); err != nil {
		return errors.Join(ferr, err)
	}
	if ferr != nil {
		return fmt.Errorf("%s: %w", t.name, ferr)
	}
	return nil
}

// perfThroughput reads the throughput line of etcdctl check perf:
// "PASS: Throughput is 150 writes/s" or "FAIL: Throughput too low: 55
// writes/s".
var perfThroughput = regexp.MustCompile(`Throughput (?:is|too low:) (\d+(?:\.\d+)?) writes/s`)

// etcdctlCheckPerf runs upstream `etcdctl check perf` against t and
// returns its PASS and FAIL lines and the throughput it reports. A FAIL
// (exit status 1) is a result, not an error.
func (o options) etcdctlCheckPerf(ctx context.Context, t *target) ([]string, float64, error) {
	args := []string{"--endpoints=" + strings.Join(t.endpoints, ","), "--dial-timeout=10s", "--command-timeout=2m"}
	if t.pkiDir != "" {
		args = append(args, "--cacert="+filepath.Join(t.pkiDir, "ca.crt"),
			"--cert="+filepath.Join(t.pkiDir, "admin.crt"), "--key="+filepath.Join(t.pkiDir, "admin.key"))
	}
	args = append(args, "check", "perf", "--load="+o.checkPerf)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, o.etcdctl, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // no ETCDCTL_* from the caller
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	lines, ops := perfLines(out.String())
	if len(lines) == 0 {
		if err == nil {
			err = fmt.Errorf("no result lines")
		}
		return nil, 0, fmt.Errorf("etcdctl check perf: %w: %s", err, tail(out.String(), 300))
	}
	return lines, ops, nil
}

// perfResult finds a result in a line of check perf's output; its
// progress bar redraws with carriage returns and may share a line with
// the first result. Two of its failures have no FAIL prefix.
var perfResult = regexp.MustCompile(`(PASS|FAIL|Slowest request took too long|Stddev too high)\b.*$`)

// perfLines returns check perf's result lines and the throughput among
// them.
func perfLines(out string) ([]string, float64) {
	var lines []string
	var ops float64
	for l := range strings.FieldsFuncSeq(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if m := perfResult.FindString(l); m != "" {
			lines = append(lines, strings.TrimSpace(m))
			if m := perfThroughput.FindStringSubmatch(l); m != nil {
				ops, _ = strconv.ParseFloat(m[1], 64)
			}
		}
	}
	return lines, ops
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
