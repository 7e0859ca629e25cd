package kvwriter

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// TestTwoWritersOnOneCluster runs two writers one after the other on a
// real etcd: each history is linearizable on its own, since each writer
// has keys of its own (the model starts every key at 0, so a second
// writer on the first one's keys would read writes nobody made).
func TestTwoWritersOnOneCluster(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "m1")
	var keys []string
	for run := range 2 {
		// Two workers, each reading the other's key.
		ep := c.Endpoints()[0]
		w, err := Start([]string{ep, ep}, c.TLS())
		require.NoError(t, err)
		deadline := time.Now().Add(10 * time.Second)
		for {
			w.mu.Lock()
			n := len(w.hist)
			w.mu.Unlock()
			if n >= 20 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // polling interval, bounded by the deadline
		}
		res, err := w.Stop(10 * time.Second)
		require.NoError(t, err)
		require.Positive(t, res.Acked, "run %d", run)
		assert.True(t, strings.HasPrefix(w.key(0), Prefix), "%s is not under %s", w.key(0), Prefix)
		keys = append(keys, w.key(0))
		assert.Equal(t, porcupine.Ok, res.Check(time.Minute), "run %d: history not linearizable", run)
	}
	assert.NotEqual(t, keys[0], keys[1], "the second writer reuses the first one's keys")
}

// TestWriterLeavesASilentMember cuts one member of three off its clients
// the way a killed or paused VM is: its client port drops every packet
// (iptables on loopback), so no reset ever comes. The writer must keep
// acknowledging puts through the other two, not wait out opTimeout on
// the silent one, and its history must stay linearizable. Without the
// clients' keepalive (TCP_USER_TIMEOUT) every worker soon waits 15 s on
// the silent member and the gap is as long.
func TestWriterLeavesASilentMember(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop a port's packets (iptables); CI runs make test as root")
	}
	ipt, err := exec.LookPath("iptables")
	require.NoError(t, err, "iptables (hack/deps.sh installs it)")
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "m1", "m2", "m3")
	w, err := Start(c.Endpoints(), c.TLS())
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			w.Stop(time.Second)
		}
	})
	waitAcks := func(after time.Time, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !w.LastAck().After(after) {
			require.True(t, time.Now().Before(deadline), "no put acknowledged %s", what)
			time.Sleep(20 * time.Millisecond) // polling interval, bounded by the deadline
		}
	}
	waitAcks(w.start, "before the cut")

	u, err := url.Parse(c.Member(t, "m1").ClientURL)
	require.NoError(t, err)
	rule := []string{"INPUT", "-i", "lo", "-p", "tcp", "--dport", u.Port(), "-j", "DROP"}
	out, err := exec.Command(ipt, append([]string{"-w", "-I"}, rule...)...).CombinedOutput()
	require.NoError(t, err, "iptables: %s", out)
	cut := true
	uncut := func() {
		if cut {
			out, err := exec.Command(ipt, append([]string{"-w", "-D"}, rule...)...).CombinedOutput()
			assert.NoError(t, err, "iptables: %s", out)
			cut = false
		}
	}
	t.Cleanup(uncut)

	// Long enough that a worker stuck on m1 would show: each client has
	// sent m1 a request well within it.
	cutAt := time.Now()
	for time.Since(cutAt) < 12*time.Second {
		waitAcks(time.Now(), "while m1 is silent")
		time.Sleep(200 * time.Millisecond) // spacing between checks, not a readiness wait
	}
	uncut()
	res, err := w.Stop(10 * time.Second)
	stopped = true
	require.NoError(t, err)
	assert.Less(t, res.Gap, 6*time.Second, "longest time without an acknowledged put, with m1 silent")
	assert.WithinRange(t, res.GapEnd, w.start.Add(res.Gap), time.Now(), "when the longest gap ended")
	assert.Equal(t, porcupine.Ok, res.Check(time.Minute), "history not linearizable")
}
