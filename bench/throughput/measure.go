package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

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

// measure fills t's key space, runs every load point on it in order,
// then etcdctl check perf.
func (o options) measure(ctx context.Context, t *target, logf func(string, ...any)) (clusterRun, error) {
	r := clusterRun{name: t.name, upTook: t.upTook}
	start := time.Now()
	fill := load.Config{
		Endpoints: t.endpoints, TLS: t.tls, Clients: fillClients, Conns: o.conns,
		KeySpace: o.keys, ValueSize: o.valueSize, Timeout: o.requestTimeout,
	}
	if err := load.Fill(ctx, fill); err != nil {
		return r, err
	}
	logf("%s: wrote %d keys in %s", t.name, o.keys, time.Since(start).Round(100*time.Millisecond))
	for _, p := range o.points() {
		p.Endpoints, p.TLS, p.Timeout = t.endpoints, t.tls, o.requestTimeout
		res, err := load.Run(ctx, p)
		if err != nil {
			return r, err
		}
		logf("%s: %s", t.name, res)
		r.results = append(r.results, res)
	}
	if o.checkPerf != "" {
		r.perf, r.perfOps, r.perfErr = o.etcdctlCheckPerf(ctx, t)
		logf("%s: etcdctl check perf: %s", t.name, strings.Join(r.perf, "; "))
	}
	return r, nil
}

// perfThroughput reads the throughput line of etcdctl check perf:
// "PASS: Throughput is 150 writes/s".
var perfThroughput = regexp.MustCompile(`Throughput is (\d+(?:\.\d+)?) writes/s`)

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

// perfLines returns check perf's result lines (its progress bar redraws
// with carriage returns) and the throughput among them.
func perfLines(out string) ([]string, float64) {
	var lines []string
	var ops float64
	for l := range strings.FieldsFuncSeq(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.TrimSpace(l)
		// Two of its failures have no FAIL prefix.
		if strings.HasPrefix(l, "PASS") || strings.HasPrefix(l, "FAIL") ||
			strings.HasPrefix(l, "Slowest request took too long") || strings.HasPrefix(l, "Stddev too high") {
			lines = append(lines, l)
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
