package kvwriter

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	ipt := iptables(t)
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "m1", "m2", "m3")
	w := startWriter(t, c)
	w.waitAcks(t, w.start, "before the cut")

	uncut := cut(t, ipt, []string{"INPUT", "-i", "lo", "-p", "tcp", "--dport", port(t, c.Member(t, "m1").ClientURL), "-j", "DROP"})
	// Long enough that a worker stuck on m1 would show: each client has
	// sent m1 a request well within it.
	w.keepAcking(t, 12*time.Second, "while m1 is silent")
	uncut()
	res, err := w.Stop(30 * time.Second) // as in TestWriterLeavesACutOffMember
	require.NoError(t, err)
	assert.Less(t, res.Gap, 6*time.Second, "longest time without an acknowledged put, with m1 silent")
	assert.WithinRange(t, res.GapEnd, w.start.Add(res.Gap), time.Now(), "when the longest gap ended")
	assert.Equal(t, porcupine.Ok, res.Check(time.Minute), "history not linearizable")
}

// TestWriterLeavesACutOffMember cuts one member of three off its peers,
// not off its clients, as a network partition does: m1 runs as another
// user, and iptables drops its packets to the others' peer ports and
// every packet to its own. A request m1 took before it lost its leader
// waits out etcd's request timeout (5.5 s with these raft timings); once
// its election timeout passes, m1 has no leader and refuses the writer's
// requests at once (they require a leader), so its clients ask another
// member. After the first requests' timeout, the writer must acknowledge
// puts steadily for the rest of the cut: without WithRequireLeader each
// worker's every third request waits 5.5 s on m1 again.
func TestWriterLeavesACutOffMember(t *testing.T) {
	ipt := iptables(t)
	const nobody = 65534
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.StartWith(t, pkiDir, etcdtest.Options{UID: map[string]uint32{"m1": nobody}}, "m1", "m2", "m3")
	w := startWriter(t, c)
	w.waitAcks(t, w.start, "before the cut")

	peers := port(t, c.Member(t, "m2").PeerURL) + "," + port(t, c.Member(t, "m3").PeerURL)
	uncutOut := cut(t, ipt, []string{"OUTPUT", "-o", "lo", "-p", "tcp", "-m", "owner", "--uid-owner", strconv.Itoa(nobody), "-m", "multiport", "--dports", peers, "-j", "DROP"})
	uncutIn := cut(t, ipt, []string{"INPUT", "-i", "lo", "-p", "tcp", "--dport", port(t, c.Member(t, "m1").PeerURL), "-j", "DROP"})
	cutAt := time.Now()
	w.keepAcking(t, 16*time.Second, "while m1 is cut off its peers")
	uncutAt := time.Now()
	uncutOut()
	uncutIn()
	// The final reads may wait for m1's return: its peer connections
	// dialled during the cut are in TCP's SYN backoff (1, 2, 4, 8 s), and
	// a worker whose client prefers m1 reads there (a session 32 run on
	// a slow machine ran out of 10 s).
	res, err := w.Stop(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, porcupine.Ok, res.Check(time.Minute), "history not linearizable")
	// From 7 s into the cut (m1's first requests have timed out) to
	// its end.
	from := cutAt.Add(7 * time.Second)
	gap := w.ackGap(res, from, uncutAt)
	t.Logf("longest time without an acknowledged put: %s in the whole run, %s from 7 s into the cut to its end; %d puts acknowledged", res.Gap, gap, res.Acked)
	assert.Less(t, gap, 2*time.Second, "longest time without an acknowledged put once m1's first requests timed out")
}

// iptables returns the iptables command, skipping the test when not root.
func iptables(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop packets (iptables); CI runs make test as root")
	}
	ipt, err := exec.LookPath("iptables")
	require.NoError(t, err, "iptables (hack/deps.sh installs it)")
	return ipt
}

// cut inserts an iptables rule and returns what removes it, once; the
// test's end removes it too.
func cut(t *testing.T, ipt string, rule []string) func() {
	t.Helper()
	out, err := exec.Command(ipt, append([]string{"-w", "-I"}, rule...)...).CombinedOutput()
	require.NoError(t, err, "iptables: %s", out)
	var once sync.Once
	uncut := func() {
		once.Do(func() {
			out, err := exec.Command(ipt, append([]string{"-w", "-D"}, rule...)...).CombinedOutput()
			assert.NoError(t, err, "iptables: %s", out)
		})
	}
	t.Cleanup(uncut)
	return uncut
}

func port(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Port()
}

// startWriter starts a writer on c's members, stopped at the test's end
// unless the test stops it.
func startWriter(t *testing.T, c *etcdtest.Cluster) *Writer {
	t.Helper()
	w, err := Start(c.Endpoints(), c.TLS())
	require.NoError(t, err)
	t.Cleanup(func() {
		w.cancel()
		w.wg.Wait()
		for _, c := range w.cli {
			c.Close()
		}
	})
	return w
}

// waitAcks waits up to 20 s for a put acknowledged after after.
func (w *Writer) waitAcks(t *testing.T, after time.Time, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !w.LastAck().After(after) {
		require.True(t, time.Now().Before(deadline), "no put acknowledged %s", what)
		time.Sleep(20 * time.Millisecond) // polling interval, bounded by the deadline
	}
}

// keepAcking checks, for d, that puts keep being acknowledged.
func (w *Writer) keepAcking(t *testing.T, d time.Duration, what string) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; {
		w.waitAcks(t, time.Now(), what)
		time.Sleep(200 * time.Millisecond) // spacing between checks, not a readiness wait
	}
}

// ackGap is the longest time between from, the puts of res acknowledged
// between from and to, and to.
func (w *Writer) ackGap(res Result, from, to time.Time) time.Duration {
	var acks []time.Time
	for _, op := range res.History {
		if in := op.Input.(Input); in.Put && op.Output.(Output).Set {
			if at := w.start.Add(time.Duration(op.Return)); at.After(from) && at.Before(to) {
				acks = append(acks, at)
			}
		}
	}
	slices.SortFunc(acks, time.Time.Compare)
	gap, last := time.Duration(0), from
	for _, at := range append(acks, to) {
		gap = max(gap, at.Sub(last))
		last = at
	}
	return gap
}
