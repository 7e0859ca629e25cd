package testenv

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// FreePort returns a TCP port on 127.0.0.1 that the kernel lets us bind,
// and that no other call in this test binary has returned.
//
// It is chosen below the kernel's ephemeral range. A port from bind(:0)
// comes from that range: between closing the probe and the real bind, any
// outgoing connection (the tests make many) may take it as its source
// port, and the next bind(:0) may hand out the same port again, so that
// one node got the same port for its node API and its etcd (seen in
// init's TestContainerTwoWiped). Below the range only a listener can take
// a port, and each binary starts at a random place in it, so that the
// packages that go test runs at once rarely meet.
func FreePort(tb testing.TB) int {
	tb.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	if nextPort == 0 {
		low := 32768
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					low = n
				}
			}
		}
		portLow, portHigh = max(1024, low-20000), low
		nextPort = portLow + rand.IntN(portHigh-portLow)
	}
	for range portHigh - portLow {
		p := nextPort
		nextPort++
		if nextPort >= portHigh {
			nextPort = portLow
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err == nil {
			_ = l.Close()
			return p
		}
	}
	tb.Fatalf("testenv: no free port in %d-%d", portLow, portHigh)
	return 0
}

var (
	portMu                      sync.Mutex
	nextPort, portLow, portHigh int
)
