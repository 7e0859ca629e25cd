package member

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when a test leaks a goroutine of the etcd
// client or of gRPC (a client, a session or a watch not closed): the init
// runs for months, so a leak per boot step would add up.
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
	code := m.Run()
	if code == 0 {
		if leaked := clientGoroutines(5 * time.Second); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leaked %d etcd client goroutines:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
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
