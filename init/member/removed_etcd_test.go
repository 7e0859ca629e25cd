package member

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helloWithSNI opens a TLS connection to addr without a certificate, with
// serverName as its SNI, and reads until etcd closes it: etcd logs the
// failed handshake with the server name.
func helloWithSNI(ctx context.Context, t *testing.T, addr, serverName string) {
	t.Helper()
	d := &tls.Dialer{Config: &tls.Config{ServerName: serverName, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		t.Logf("handshake with %s: %v", addr, err) // TLS 1.2 fails here, 1.3 on the first read
		return
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, c)
	t.Logf("read from %s: %v", addr, err)
}

// waitLog waits until n's etcd log has a line with every one of subs.
func waitLog(ctx context.Context, t *testing.T, n *node, subs ...string) string {
	t.Helper()
	for {
		n.mu.Lock()
		log := n.log.String()
		n.mu.Unlock()
		for line := range strings.SplitSeq(log, "\n") {
			all := true
			for _, s := range subs {
				all = all && strings.Contains(line, s)
			}
			if all {
				return line
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("etcd %s never logged a line with %q", n.name, subs)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRemovedWatchIgnoresSNI: a stranger's TLS hello with the removal
// sentence as its server name, to the client and to the peer port, makes
// etcd log the sentence; the watch on etcd's stderr does not fire.
func TestRemovedWatchIgnoresSNI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := newTestCluster(t)
	n1 := c.node("n1")
	n1.start(initialCluster(n1), "new")
	n1.waitReady(ctx)
	n1.mu.Lock()
	watch := n1.watch
	n1.mu.Unlock()

	for _, port := range []int{n1.clientPort, n1.peerPort} {
		helloWithSNI(ctx, t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), RemovedMessage)
	}
	// The sentence is in etcd's output, so the watch had its chance.
	for _, ep := range []string{"client", "peer"} {
		line := waitLog(ctx, t, n1, "rejected connection on "+ep+" endpoint", RemovedMessage)
		t.Logf("etcd: %s", line)
	}
	// A later line proves the watch has read the earlier ones: etcd's
	// output reaches the log and the watch in order, one write at a time.
	helloWithSNI(ctx, t, net.JoinHostPort("127.0.0.1", strconv.Itoa(n1.clientPort)), "sentinel.example")
	waitLog(ctx, t, n1, "rejected connection on client endpoint", "sentinel.example")

	assert.False(t, watch.Seen(), "the watch fired on a stranger's server name")
	select {
	case <-watch.Said():
		t.Fatal("the watch took a stranger's server name for etcd's entry")
	default:
	}
	// etcd still serves: nothing stopped it either.
	n1.waitReady(ctx)
}

// TestRemovedWatchForgedStderr: a line that is not etcd's own JSON entry,
// written to etcd's stderr stream, fires nothing.
func TestRemovedWatchForgedStderr(t *testing.T) {
	w := NewRemovedWatch()
	for _, l := range []string{
		RemovedMessage,
		"{\"level\":\"warn\",\"msg\":\"" + RemovedMessage + "\"}",
		"panic: " + RemovedMessage,
		strings.Replace(removedLine, "server error", "peer error", 1),
	} {
		_, err := io.WriteString(w, l+"\n")
		require.NoError(t, err)
	}
	assert.False(t, w.Seen())
}

// TestRemovedWatchRealRemoval: a running member removed by the cluster:
// etcd logs its entry, the watch confirms with the other members' list
// and fires.
func TestRemovedWatchRealRemoval(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := newTestCluster(t)
	n1, n2, n3 := c.node("n1"), c.node("n2"), c.node("n3")
	initial := initialCluster(n1, n2, n3)
	peers := n3.client(n1, n2)
	log := newLogger(t, "n3 watch")
	watch := NewRemovedWatch(ConfirmThrough(ctx, peers, log.Logf))
	n1.start(initial, "new")
	n2.start(initial, "new")
	n3.startWith(initial, "new", n3.ClientURL(), watch)
	for _, n := range []*node{n1, n2, n3} {
		n.waitReady(ctx)
	}
	st := n3.status(ctx)
	id, cluster := st.Header.MemberId, st.Header.ClusterId
	gotCluster, gotID := watch.MemberID()
	assert.Equal(t, id, gotID, "member ID from etcd's start entry")
	assert.Equal(t, cluster, gotCluster, "cluster ID from etcd's start entry")

	// A running member is not confirmed removed (asked through n2 alone:
	// an answer from n1 itself is no confirmation either way).
	err := ConfirmRemoved(ctx, n3.client(n2), cluster, n1.status(ctx).Header.MemberId)
	require.ErrorIs(t, err, ErrStillMember)
	require.False(t, errors.Is(err, ErrRemoved))

	admin := n1.client(n1)
	require.NoError(t, settled(ctx, t.Logf, "remove n3", func(ctx context.Context) error {
		_, err := admin.MemberRemove(ctx, id)
		return err
	}))
	select {
	case <-watch.Removed():
	case <-ctx.Done():
		t.Fatal("the watch never fired for a real removal")
	}
	assert.Contains(t, log.all(), "confirmed")
	waitLog(ctx, t, n3, `"msg":"server error"`, RemovedMessage)
	require.ErrorIs(t, ConfirmRemoved(ctx, peers, cluster, id), ErrRemoved)
	// From another cluster's view nothing is confirmed.
	err = ConfirmRemoved(ctx, peers, cluster+1, id)
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrRemoved), "confirmed by another cluster: %v", err)
}
