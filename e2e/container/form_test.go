package container

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
)

// TestContainerCluster runs three containers of the OCI image on the
// host's network: they form one cluster from static peers, and every
// member takes a write and serves every other's. Then, under a writer,
// the leader's container is stopped as a runtime stops one (SIGTERM): it
// hands its leadership over, stops etcd and exits 0, and the other two go
// on as a healthy 2/3 cluster. Started again, it rejoins as the same
// member with its data, and serves what was written while it was away.
// The writer's history is checked with porcupine.
func TestContainerCluster(t *testing.T) {
	requirePodman(t)
	f := newFixture(t, loadImage(t))
	for _, n := range f.nodes {
		f.run(n)
	}
	all := f.client(f.nodes...)
	for _, n := range f.nodes {
		cli := f.client(n)
		waitFor(t, 3*time.Minute, n.name+" serves linearizable reads", func() string { return f.serves(cli, n) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ml, err := all.MemberList(ctx)
	require.NoError(t, err)
	require.Len(t, ml.Members, 3)
	for _, m := range ml.Members {
		assert.False(t, m.IsLearner, "%s is still a learner", m.Name)
	}
	for _, n := range f.nodes {
		log := f.logs(n)
		// Container mode's own step, and none of an appliance's.
		assert.Contains(t, log, "find addresses", "%s: /init as the container's PID 1 did not take container mode", n.name)
		assert.NotContains(t, log, "mount pseudo filesystems", "%s ran an appliance step", n.name)
	}

	// A write through each member reads back through every other.
	for _, w := range f.nodes {
		key, val := "ctest/from-"+w.name, "written through "+w.name
		_, err := f.client(w).Put(ctx, key, val)
		require.NoError(t, err, "put through %s", w.name)
		for _, r := range f.nodes {
			got, err := f.client(r).Get(ctx, key)
			require.NoError(t, err, "get %s through %s", key, r.name)
			require.Len(t, got.Kvs, 1, "get %s through %s", key, r.name)
			assert.Equal(t, val, string(got.Kvs[0].Value))
		}
	}

	// Stop the leader's container under a writer.
	var eps []string
	for _, n := range f.nodes {
		eps = append(eps, n.endpoint())
	}
	w, err := kvwriter.Start(eps, f.adminTLS())
	require.NoError(t, err)
	var leader *ctr
	ids := map[string]uint64{}
	for _, n := range f.nodes {
		id, lead := f.statusOf(all, n)
		ids[n.name] = id
		if id == lead {
			leader = n
		}
	}
	require.NotNil(t, leader, "no node is the leader")
	waitFor(t, time.Minute, "the writer's first acknowledged write", func() string {
		if w.LastAck().IsZero() {
			return "none yet"
		}
		return ""
	})
	start := time.Now()
	mustPodman(t, "stop", "--time", "60", leader.podName)
	t.Logf("stop %s (the leader): %s", leader.name, time.Since(start).Round(time.Millisecond))
	code := strings.TrimSpace(mustPodman(t, "inspect", "--format", "{{.State.ExitCode}}", leader.podName))
	assert.Equal(t, "0", code, "%s did not exit cleanly on SIGTERM", leader.name)
	log := f.logs(leader)
	assert.Contains(t, log, "leadership transfer finished", "%s stopped without handing its leadership over", leader.name)
	assert.Contains(t, log, "shutdown complete")

	var rest []*ctr
	for _, n := range f.nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	keys := map[string]string{}
	for _, n := range rest {
		cli := f.client(n)
		waitFor(t, time.Minute, n.name+" serves without "+leader.name, func() string { return f.serves(cli, n) })
		key, val := "ctest/while-"+leader.name+"-away-"+n.name, "through "+n.name
		_, err := cli.Put(ctx, key, val)
		require.NoError(t, err, "put through %s with %s stopped", n.name, leader.name)
		keys[key] = val
		_, lead := f.statusOf(cli, n)
		assert.NotZero(t, lead, "%s knows no leader", n.name)
		assert.NotEqual(t, ids[leader.name], lead, "%s still follows the stopped %s", n.name, leader.name)
	}

	// Started again: the same member, with its data, caught up.
	mustPodman(t, "start", leader.podName)
	cli := f.client(leader)
	waitFor(t, 3*time.Minute, leader.name+" serves again", func() string { return f.serves(cli, leader) })
	id, _ := f.statusOf(cli, leader)
	assert.Equal(t, fmt.Sprintf("%x", ids[leader.name]), fmt.Sprintf("%x", id), "%s came back as another member", leader.name)
	for k, v := range keys {
		got, err := cli.Get(ctx, k)
		require.NoError(t, err, "get %s through %s", k, leader.name)
		require.Len(t, got.Kvs, 1, "%s through %s: missing", k, leader.name)
		assert.Equal(t, v, string(got.Kvs[0].Value))
	}
	res := checkHistory(t, w)
	t.Logf("writer across the stop and start of %s: %d acknowledged writes, longest gap %s", leader.name, res.Acked, res.Gap.Round(10*time.Millisecond))
}
