package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/init/supervise"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// startEtcd works out this node's member (its name, URLs, TLS files, quota
// and compaction) for the lifecycle, a long-lived part that boot starts
// next, which decides how to start etcd (DESIGN §5) and keeps it running.
func (n *node) startEtcd(ctx context.Context) error {
	host := ""
	switch {
	case n.domain != "":
		host = n.name + "." + n.domain
	case len(n.ips) > 0:
		host = n.ips[0].String()
	default:
		host = "127.0.0.1"
	}
	n.member = etcdMember{
		Name:          n.name,
		Cluster:       n.seed.Cluster,
		DataDir:       filepath.Join(n.root, "etcd"),
		PKIDir:        n.pkiDir(),
		ListenIP:      n.listenIP,
		AdvertiseHost: host,
		ClientPort:    n.seed.Etcd.ClientPort,
		PeerPort:      n.seed.Etcd.PeerPort,
		HTTPPort:      n.seed.Etcd.HTTPPort,
		PeerOnly:      n.peerOnly,
	}
	if err := os.MkdirAll(n.member.DataDir, 0o700); err != nil {
		return err
	}
	n.member.tune(n.seed.Etcd)
	dataBytes, dbBytes, err := dataSizes(n.root, n.member.DataDir)
	if err != nil {
		n.log.Printf("etcd: %v", err)
	}
	var why string
	n.member.QuotaBytes, why = backendQuota(n.seed.Etcd.QuotaBackendBytes, dataBytes, dbBytes)
	n.log.Printf("etcd: database quota %s (%s); compaction %s; corruption checks on%s", size(n.member.QuotaBytes), why, n.member.compactionNote(), n.member.tuningNote())
	return nil
}

// launch starts etcd for m under a new supervisor, unless the node is
// shutting down. removed is told when etcd says its member was removed.
func (n *node) launch(ctx context.Context, m etcdMember, removed io.Writer) (*supervise.Supervisor, <-chan struct{}) {
	var out io.Writer = n.ring
	var async *console.Async // the console's, when there is one
	if n.container {
		out = io.MultiWriter(n.ring, os.Stderr)
	} else if async = n.etcdConsole(); async != nil {
		out = io.MultiWriter(n.ring, async)
	}
	// etcd logs every refused connection, which anyone who reaches its
	// ports can cause: repeats are limited before the ring and console
	// (the removed-member watch still reads every line).
	limited := console.NewLimiter(m.logFilter(out))
	out = limited
	sup := &supervise.Supervisor{
		Name:    "etcd",
		Path:    n.etcdBin,
		Args:    m.Args(),
		Env:     []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/root", "ETCD_UNSUPPORTED_ARCH="},
		Dir:     n.root,
		Stdout:  io.MultiWriter(out, removed),
		Log:     n.log.Printf,
		Backoff: supervise.Backoff{Initial: time.Second, Max: 30 * time.Second},
		// SIGKILL once its WAL and database are closed (etcdstop.go).
		Finished: etcdStorageClosed("/proc", m.DataDir),
		// End the client connections still open after a drain, rather
		// than wait for etcd's request timeout (etcdstop.go).
		Stopping: etcdCutClients("/proc", m.clientPorts(), clientDrain, n.log.Printf),
	}
	sup.OnExit = func(err error, _ int) {
		if err != nil {
			n.mu.Lock()
			if n.etcd == sup {
				n.lastExit = err.Error()
			}
			n.mu.Unlock()
		}
	}
	// The supervisor's loop is a watchdog liveness source while it runs.
	alive := n.heart("etcd supervisor", time.Minute)
	sup.Alive = alive.Beat
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopping {
		alive.Stop()
		return nil, nil
	}
	n.member = m
	n.etcd = sup
	n.flushEtcdLog = func() {
		limited.Flush()
		if async != nil {
			async.Flush(etcdLogFlush)
		}
	}
	n.readyc = make(chan struct{})
	n.lastExit = ""
	go func() {
		defer alive.Stop()
		if err := sup.Run(ctx); err != nil {
			n.log.Printf("etcd supervisor: %v", err)
		}
	}()
	return sup, n.readyc
}

// supervisor returns the running etcd supervisor, or nil.
func (n *node) supervisor() *supervise.Supervisor {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.etcd
}

// How often watchReady looks: while etcd does not serve, while it serves
// as a learner, and once it serves.
const (
	waitingLook = 100 * time.Millisecond
	learnerLook = 500 * time.Millisecond
	servingLook = 2 * time.Second
)

// watchReady prints "etcd ready" each time the local member starts serving
// linearizable reads, and "etcd not ready" when it stops.
func (n *node) watchReady(ctx context.Context) {
	lc := &localConn{
		addr: func() string { return n.localMember().localClientAddr() },
		dial: func() (*clientv3.Client, error) { return n.localMember().client() },
	}
	defer lc.close()
	up, learner, restarts := false, false, 0
	var last *supervise.Supervisor
	// Until etcd serves, a look every 100 ms: before etcd listens a look
	// is one refused loopback connection (localConn), and once it listens
	// a read waits inside the TLS handshake until etcd serves (or its 3 s
	// deadline), so the looks add no load; the 500 ms tick this replaced
	// saw a start that is fast up to half a second late.
	t := time.NewTicker(waitingLook)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sup := n.supervisor()
		if sup == nil {
			continue
		}
		// No client before etcd listens (localConn): the first boot, a
		// restart, and every reboot wait for this ready.
		c, err := lc.get()
		if err != nil {
			n.log.Printf("etcd client: %v", err)
			continue
		}
		if c == nil {
			continue
		}
		err = ready(ctx, c)
		// A restart between two probes still counts as an outage, so
		// each new etcd process is announced once it serves.
		if r := sup.Restarts(); sup != last || r != restarts {
			last = sup
			restarts, up, learner = r, false, false
			t.Reset(waitingLook)
		}
		// A learner serves no linearizable reads; it is up when it
		// answers a status request, which is what its promotion waits for.
		if err != nil && !learner && isLearner(ctx, c) {
			learner = true
			n.log.Printf("etcd serving as a learner (%s)", n.localMember().ClientURL())
			n.readyOnce(ctx)
			// A learner refuses each read at once: look less often
			// while it catches up.
			t.Reset(learnerLook)
		}
		if err == nil {
			learner = false
		}
		switch {
		case err == nil && !up:
			up = true
			// The member loop and the health gate wait for this, so
			// it comes first: the garbage collection and the console
			// line (queued behind etcd's start-up lines) come after.
			n.readyOnce(ctx)
			steadyGC()
			n.log.Printf("etcd ready (%s) init rss %s", n.localMember().ClientURL(), selfRSS())
			t.Reset(servingLook)
		case err != nil && up:
			up = false
			n.log.Printf("etcd not ready: %v", err)
			t.Reset(waitingLook)
		}
		if err != nil {
			lc.failed()
		}
	}
}

// selfRSS returns init's resident set size in KiB from /proc, or "?".
func selfRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	rollup, _ := os.ReadFile("/proc/self/smaps_rollup") // "" without it
	return rssOf(string(b), string(rollup))
}

// rssOf reads VmRSS from a /proc/PID/status text, in KiB, with its anon,
// file and shmem parts, and the proportional set size from a
// /proc/PID/smaps_rollup text: "30004 KiB (anon 10800, file 4, shmem
// 19200; pss 21000)". The pages of /init's own binary that are mapped
// (the kernel maps 64 KiB around each fault) are file pages in a
// container and shmem in the appliance, whose root is the initramfs on
// tmpfs: there they are in memory whether mapped or not. etcd runs from
// the same file (runetcd.go), and the PSS counts a page both map half to
// each: the init's share of the memory.
func rssOf(status, rollup string) string {
	fields := procFields(status)
	rss, ok := fields["VmRSS"]
	if !ok {
		return "?"
	}
	anon, ok := fields["RssAnon"]
	if !ok {
		return rss + " KiB"
	}
	out := fmt.Sprintf("%s KiB (anon %s, file %s, shmem %s", rss, anon, fields["RssFile"], fields["RssShmem"])
	if pss, ok := procFields(rollup)["Pss"]; ok {
		out += "; pss " + pss
	}
	return out + ")"
}

// procFields reads the "Key:   value kB" lines of a /proc text, the
// values without their unit.
func procFields(text string) map[string]string {
	fields := map[string]string{}
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			fields[k] = strings.TrimSuffix(strings.TrimSpace(v), " kB")
		}
	}
	return fields
}

// isLearner reports whether the local member answers a status request as
// a learner.
func isLearner(ctx context.Context, c *clientv3.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := c.Status(ctx, c.Endpoints()[0])
	return err == nil && st.IsLearner
}

// etcdConsole returns the console sink of etcd's lines, opened on its
// first use and kept for every etcd the node starts after it: one queue
// and one goroutine for the node's life (each start opened its own and
// kept them, so every restart of etcd by the member lifecycle leaked a
// descriptor and a goroutine). The console is slow; an Async sink drops
// lines rather than stall etcd in write(2). The ring keeps them all, but
// for the repeats etcd's limiter holds back. nil when there is no
// console.
func (n *node) etcdConsole() *console.Async {
	n.consoleOnce.Do(func() {
		if f, err := os.OpenFile("/dev/console", os.O_WRONLY, 0); err == nil {
			n.consoleSink = console.NewAsync(f, 4096)
		}
	})
	return n.consoleSink
}

// etcdLogFlush bounds the wait for etcd's last console lines at a
// shutdown: the serial console writes about 11 KB a second.
const etcdLogFlush = time.Second
