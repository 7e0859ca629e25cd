package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// netdEnv makes the test binary the network daemon (see TestMain), so
// that tests start a real detached daemon process with Config.Netd.
const netdEnv = "ETCDBOX_CLUSTER_TEST_NETD"

// TestMain runs the test binary as the network daemon when netdEnv is
// set; otherwise it runs the tests and fails when one leaked a goroutine
// of the etcd client or gRPC (a probe's client not closed).
func TestMain(m *testing.M) {
	if os.Getenv(netdEnv) == "1" {
		os.Exit(netdMain(os.Args[1:]))
	}
	code := m.Run()
	if code == 0 {
		if leaked := clientGoroutines(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leaked %d etcd client goroutines:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// netdMain is `etcdbox cluster netd` for the tests: --dir D --domain X.
func netdMain(args []string) int {
	fs := flag.NewFlagSet("netd", flag.ContinueOnError)
	dir := fs.String("dir", "", "")
	domain := fs.String("domain", DefaultDomain, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := ServeNetwork(ctx, *dir, *domain, os.Stderr); err != nil {
		return 1
	}
	return 0
}

// clientGoroutines returns the stacks of live goroutines in the etcd
// client or gRPC, waiting up to d for them to end.
func clientGoroutines(d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "go.etcd.io/etcd/client/v3") || strings.Contains(g, "google.golang.org/grpc") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(50 * time.Millisecond)
	}
}
