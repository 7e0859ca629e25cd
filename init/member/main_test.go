package member

import (
	"flag"
	"os"
	"testing"

	"github.com/etcdbox/etcdbox/internal/leakcheck"
)

// TestMain fails the package when a test leaks a goroutine of the etcd
// client or of gRPC (see leakcheck): the init runs for months, so a leak
// per boot step would add up.
//
// The etcd tests spend most of their time waiting for etcd (a membership
// change waits until the members have been connected for 5s), not on the
// CPU, so they run 4 at a time unless -test.parallel says otherwise.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(leakcheck.Run(m))
}
