//go:build testhooks

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcdbox/etcdbox/init/supervise"
)

// This file is compiled only into test images (go build -tags testhooks):
// release images have no way to kill etcd from outside.

// testHookPort serves the hooks, plain HTTP, inside the guest.
const testHookPort = ":9999"

// Faults a test image injects before a boot step, named on the kernel
// command line by the step's name with dashes for spaces:
//
//	etcdbox.test.hang=start-etcd   the init hangs inside the step: the
//	                               step's watchdog budget runs out, the
//	                               watchdog is no longer fed, and it
//	                               resets the machine
//	etcdbox.test.crash=start-etcd  the init exits, and the kernel panics
const (
	hangKey  = "etcdbox.test.hang"
	crashKey = "etcdbox.test.crash"
)

// panicEnv names the goroutines and jobs (supervise.Go and Catch; a name
// matches by prefix, comma-separated) that panic once each, at their first
// run: ETCDBOX_TEST_PANIC="member lifecycle,ready watch". A container
// test reads the init's survival from its log.
const panicEnv = "ETCDBOX_TEST_PANIC"

// quorumBoundEnv shortens the quorum watch's bound (and its poll, to a
// fifth of it): ETCDBOX_TEST_QUORUM_BOUND=3s.
const quorumBoundEnv = "ETCDBOX_TEST_QUORUM_BOUND"

// maintainEnv shortens the automatic maintenance's period:
// ETCDBOX_TEST_MAINTAIN_EVERY=2s.
const maintainEnv = "ETCDBOX_TEST_MAINTAIN_EVERY"

func init() {
	if v := os.Getenv(quorumBoundEnv); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			quorumLossBound, quorumPoll = d, d/5
		}
	}
	if v := os.Getenv(maintainEnv); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			maintainEvery = d
		}
	}
	if names := os.Getenv(panicEnv); names != "" {
		supervise.BeforeRun = panicOnce(names)
	}
	beforeStep = faultBeforeStep
	startTestHooks = serveTestHooks
}

// panicOnce is a supervise.BeforeRun that makes each long-lived part
// whose name starts with one of names (comma-separated) panic once.
func panicOnce(names string) func(string) {
	var mu sync.Mutex
	panicked := map[string]bool{}
	return func(name string) {
		for _, want := range strings.Split(names, ",") {
			if want == "" || !strings.HasPrefix(name, want) {
				continue
			}
			mu.Lock()
			first := !panicked[name]
			panicked[name] = true
			mu.Unlock()
			if first {
				panic("test hook: " + name + " panics once")
			}
		}
	}
}

// faultBeforeStep hangs or ends the init before the boot step the kernel
// command line names (hangKey, crashKey).
func faultBeforeStep(n *node, step string) {
	slug := strings.ReplaceAll(step, " ", "-")
	switch {
	case n.cmdline[hangKey] == slug:
		n.log.Printf("test hook: hanging before %s: the step goes silent, and the watchdog stops being fed", step)
		select {}
	case n.cmdline[crashKey] == slug:
		n.log.Printf("test hook: the init exits before %s", step)
		os.Exit(3)
	}
}

// serveTestHooks serves the test hooks on testHookPort.
func serveTestHooks(_ context.Context, n *node) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/kill-etcd", func(w http.ResponseWriter, r *http.Request) { killEtcd(n, w) })
	// A loop of the init that hangs: a liveness source that never beats,
	// so the watchdog stops being fed and resets the machine.
	mux.HandleFunc("POST /hook/hang", func(w http.ResponseWriter, r *http.Request) {
		if n.dog == nil {
			http.Error(w, "no hardware watchdog armed", http.StatusConflict)
			return
		}
		n.heart("test hook hang", time.Second)
		n.log.Printf("test hook: a loop hangs: the watchdog stops being fed")
		w.WriteHeader(http.StatusNoContent)
	})
	// resolve looks a name up with the node's own resolver
	// (/etc/resolv.conf), so tests can see what a guest's lookup of an
	// outside name does on a closed network.
	mux.HandleFunc("GET /hook/resolve", resolveHook)
	srv := &http.Server{Addr: testHookPort, Handler: mux}
	go func() {
		if err := srv.ListenAndServe(); err != nil {
			n.log.Printf("test hooks: %v", err)
		}
	}()
	n.log.Printf("test hooks listening on %s", testHookPort)
}

// killEtcd sends SIGKILL to the running etcd.
func killEtcd(n *node, w http.ResponseWriter) {
	sup := n.supervisor()
	pid := 0
	if sup != nil {
		pid = sup.Pid()
	}
	if pid == 0 {
		http.Error(w, "etcd is not running", http.StatusConflict)
		return
	}
	if err := sup.Signal(syscall.SIGKILL); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	n.log.Printf("test hook: sent SIGKILL to etcd (pid %d)", pid)
	w.WriteHeader(http.StatusNoContent)
}

// resolveHook answers GET /hook/resolve?name=NAME with the addresses, or
// 502 and the error, and the lookup's time in X-Elapsed.
func resolveHook(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	elapsed := time.Since(start)
	w.Header().Set("X-Elapsed", elapsed.String())
	if err != nil {
		http.Error(w, fmt.Sprintf("lookup %s: %v (after %s)", name, err, elapsed), http.StatusBadGateway)
		return
	}
	fmt.Fprintln(w, strings.Join(addrs, "\n"))
}
