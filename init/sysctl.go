package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A sysctl is one kernel setting the init writes at boot, with why.
type sysctl struct {
	key, value, why string
}

// sysctls are the kernel settings of an etcd node. The init owns the
// whole machine, so it sets them for the machine; in container mode the
// host owns them, and the init leaves them alone.
var sysctls = []sysctl{{
	// A dead peer must be noticed in seconds: etcd's member health, its
	// etcd_network_active_peers metric, and so the init's own removal of
	// a replaced disk's stale member (init/member/remove.go, which waits
	// for the leader to report that member unreachable) all hang on it.
	//
	// etcd means to find a broken peer stream within its 5 s read and
	// write timeouts (rafthttp.ConnReadTimeout), but in 3.7 those are
	// dead code: client/pkg/transport.NewTimeoutTransport sets them
	// through http.Transport.Dial, which the DialContext that
	// NewTransport sets overrides. So a peer that vanishes without a
	// FIN or a RST (a power cut, a kernel panic, a cut cable) is noticed
	// only by TCP: by the 30 s + 9 x 15 s keepalive of the stream that
	// reads from it (165 s), or by the retransmissions of the stream that
	// writes to it, which the default tcp_retries2 of 15 gives up after
	// about 924 s. The writer always has something in flight (etcd's link
	// heartbeat, every 1.7 s), so 5 retries (the kernel gives up about
	// 12.6 s after the first unanswered segment) bring the loss within a
	// few seconds of etcd's own intent. RFC 1122 asks for 100 s at least
	// on a general host; this is a dedicated node on a local network,
	// and a connection that times out is dialled again at once by etcd
	// and by every etcd client, with nothing lost (raft resends).
	key: "net/ipv4/tcp_retries2", value: "5",
	why: "notice a dead etcd peer in about 13 s, not 165 s",
}}

// tuneKernel writes the node's sysctls under /proc/sys.
func (n *node) tuneKernel(context.Context) error {
	return writeSysctls("/proc/sys", sysctls, n.log.Printf)
}

// writeSysctls writes each setting under root and logs it; it reports
// every one that failed, by name, and goes on with the others.
func writeSysctls(root string, set []sysctl, logf func(string, ...any)) error {
	var errs []error
	for _, s := range set {
		name := strings.ReplaceAll(s.key, "/", ".")
		if err := os.WriteFile(filepath.Join(root, s.key), []byte(s.value), 0); err != nil {
			errs = append(errs, fmt.Errorf("sysctl %s=%s: %w", name, s.value, err))
			continue
		}
		logf("sysctl %s=%s: %s", name, s.value, s.why)
	}
	return errors.Join(errs...)
}
