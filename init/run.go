package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/init/supervise"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// startEtcd starts upstream etcd as a supervised child and watches for it
// to serve. A member with data restarts with it; one without bootstraps a
// single-member cluster of its own name.
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
	n.member = member{
		Name:          n.name,
		Cluster:       n.seed.Cluster,
		DataDir:       filepath.Join(n.root, "etcd"),
		PKIDir:        n.pkiDir(),
		ListenIP:      n.listenIP,
		AdvertiseHost: host,
		ClientPort:    n.seed.Etcd.ClientPort,
		PeerPort:      n.seed.Etcd.PeerPort,
	}
	if n.member.hasData() {
		n.member.State = "existing"
		n.log.Printf("etcd: restarting member %s with its data", n.name)
	} else {
		n.member.State = "new"
		n.log.Printf("etcd: bootstrapping member %s of cluster %q", n.name, n.seed.Cluster)
	}
	if err := os.MkdirAll(n.member.DataDir, 0o700); err != nil {
		return err
	}
	var out io.Writer = n.ring
	if n.container {
		out = io.MultiWriter(n.ring, os.Stderr)
	} else if f, err := os.OpenFile("/dev/console", os.O_WRONLY, 0); err == nil {
		// The console is slow; an Async sink drops lines rather than
		// stall etcd in write(2). The ring keeps them all.
		out = io.MultiWriter(n.ring, console.NewAsync(f, 4096))
	}
	n.etcd = &supervise.Supervisor{
		Name:    "etcd",
		Path:    n.etcdBin,
		Args:    n.member.Args(),
		Env:     []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/root", "ETCD_UNSUPPORTED_ARCH="},
		Dir:     n.root,
		Stdout:  out,
		Log:     n.log.Printf,
		Backoff: supervise.Backoff{Initial: time.Second, Max: 30 * time.Second},
	}
	go func() {
		if err := n.etcd.Run(ctx); err != nil {
			n.log.Printf("etcd supervisor: %v", err)
		}
	}()
	go n.watchReady(ctx)
	return nil
}

// watchReady prints "etcd ready" each time the local member starts serving
// linearizable reads, and "etcd not ready" when it stops.
func (n *node) watchReady(ctx context.Context) {
	var c *clientv3.Client
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	up, restarts := false, 0
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if c == nil {
			var err error
			if c, err = n.member.client(); err != nil {
				n.log.Printf("etcd client: %v", err)
				continue
			}
		}
		err := ready(ctx, c)
		// A restart between two probes still counts as an outage, so
		// each new etcd process is announced once it serves.
		if r := n.etcd.Restarts(); r != restarts {
			restarts, up = r, false
		}
		switch {
		case err == nil && !up:
			up = true
			n.log.Printf("etcd ready (%s) init rss %s KiB", n.member.ClientURL(), selfRSS())
			t.Reset(2 * time.Second)
		case err != nil && up:
			up = false
			n.log.Printf("etcd not ready: %v", err)
			t.Reset(500 * time.Millisecond)
		}
	}
}

// selfRSS returns init's resident set size in KiB from /proc, or "?".
func selfRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSuffix(strings.TrimSpace(v), " kB")
		}
	}
	return "?"
}
