package member

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// oneMember starts a one-member cluster, waits until it serves, and
// returns a context for the test (a minute), the member and a client of
// it.
func oneMember(t *testing.T) (context.Context, *node, *clientv3.Client) {
	t.Helper()
	n1 := newTestCluster(t).node("n1")
	n1.start(initialCluster(n1), "new")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	n1.waitReady(ctx)
	return ctx, n1, n1.client(n1)
}

// TestAnswersRefusedPort: a member URL whose port refuses connections
// does not answer, and costs no Status (which etcd's client would retry
// until healthTimeout: every restart of a node waited that long for its
// own member's URL). A port that accepts but never speaks is still left
// to the Status, and a live member answers.
func TestAnswersRefusedPort(t *testing.T) {
	ctx, n1, cli := oneMember(t)

	refusing := "https://127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	require.True(t, refused(ctx, refusing), "nothing listens on %s", refusing)
	began := time.Now()
	assert.False(t, answers(ctx, cli, []string{refusing}), "a refused port does not answer")
	// Not a speed figure: the point is that the probe did not wait for
	// its deadline, which is all a refused Status would have done.
	assert.Less(t, time.Since(began), healthTimeout/2, "the refused port's Status was not retried until its deadline")

	assert.True(t, answers(ctx, cli, []string{refusing, n1.ClientURL()}), "the member answers on its second URL")
	assert.False(t, refused(ctx, n1.ClientURL()), "etcd's port accepts")

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	silentURL := "https://" + silent.Addr().String()
	assert.False(t, refused(ctx, silentURL), "a listening port is not refused")
	assert.False(t, answers(ctx, cli, []string{silentURL}), "a port that never speaks etcd does not answer")

	for _, u := range []string{"https://127.0.0.1", "://bad"} {
		assert.False(t, refused(ctx, u), "%q: no port to try, so not refused", u)
	}
}

// TestObserveMembersSkipsHealth: ObserveMembers gives the same list and
// cluster ID as Observe, without a member's health; Observe probes it.
func TestObserveMembersSkipsHealth(t *testing.T) {
	ctx, _, cli := oneMember(t)

	full, err := Observe(ctx, cli)
	require.NoError(t, err)
	bare, err := ObserveMembers(ctx, cli)
	require.NoError(t, err)
	require.Len(t, full.Members, 1)
	assert.True(t, full.Members[0].Healthy, "Observe probes the started member")
	assert.False(t, bare.Members[0].Healthy, "ObserveMembers probes nothing")
	assert.Equal(t, full.ClusterID, bare.ClusterID)
	assert.Equal(t, full.Members[0].Name, bare.Members[0].Name)
	assert.Equal(t, full.Members[0].ClientURLs, bare.Members[0].ClientURLs)
}
