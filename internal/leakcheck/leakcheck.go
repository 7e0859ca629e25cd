// Package leakcheck fails a test binary whose tests leave goroutines of
// the etcd client or of gRPC running: a client, a session or a watch not
// closed. The init and the CLI run for months, so a leak per call adds up.
//
// Use it from TestMain, after any setup of the package's own:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }
package leakcheck

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Grace is how long Run lets goroutines wind down after the tests: a
// closed client's goroutines end soon after Close returns, not at once.
const Grace = 5 * time.Second

// watched are the import paths whose goroutines count as leaks.
var watched = []string{"go.etcd.io/etcd/client/v3", "google.golang.org/grpc"}

// Run runs the tests and returns the exit code for os.Exit: m.Run's, or 1
// when the tests passed but goroutines of the etcd client or gRPC are
// still running after Grace. It prints their stacks to stderr.
func Run(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code // the failures say more than the leaks they cause
	}
	return report(os.Stderr, goroutines(Grace, watched))
}

// report prints the leaked stacks to w and returns the exit code.
func report(w io.Writer, leaked []string) int {
	if len(leaked) == 0 {
		return 0
	}
	fmt.Fprintf(w, "leaked %d etcd client goroutines:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
	return 1
}

// goroutines returns the stacks of live goroutines that run code of one of
// the packages, waiting up to d for them to end.
func goroutines(d time.Duration, packages []string) []string {
	deadline := time.Now().Add(d)
	for {
		leaked := match(dump(), packages)
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dump returns the stacks of all goroutines, as runtime.Stack prints them.
func dump() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// match returns the goroutines of a runtime.Stack dump whose stacks
// mention one of the packages.
func match(stacks string, packages []string) []string {
	var found []string
	for g := range strings.SplitSeq(stacks, "\n\n") {
		for _, p := range packages {
			if strings.Contains(g, p) {
				found = append(found, g)
				break
			}
		}
	}
	return found
}
