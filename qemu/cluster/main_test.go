package cluster

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/etcdbox/etcdbox/internal/leakcheck"
)

// netdEnv makes the test binary the network daemon (see TestMain), so
// that tests start a real detached daemon process with Config.Netd.
const netdEnv = "ETCDBOX_CLUSTER_TEST_NETD"

// TestMain runs the test binary as the network daemon when netdEnv is
// set; otherwise it runs the tests and fails when one leaked a goroutine
// of the etcd client or gRPC (a probe's client not closed; see leakcheck).
func TestMain(m *testing.M) {
	if os.Getenv(netdEnv) == "1" {
		os.Exit(netdMain(os.Args[1:]))
	}
	os.Exit(leakcheck.Run(m))
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
