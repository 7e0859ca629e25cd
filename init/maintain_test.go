package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/seed"
)

// TestContainerAutoMaintain fills a one-node cluster with a 64 MiB quota
// until etcd raises NOSPACE and refuses writes; with etcd.autoMaintain in
// its seed the node compacts, defragments and disarms by itself, and
// writes are accepted again, every acknowledged value kept.
func TestContainerAutoMaintain(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1")
	n1 := c.nodes["n1"]
	n1.bin = buildInitHooks(t)
	n1.env = []string{"ETCDBOX_TEST_MAINTAIN_EVERY=2s"}
	c.writeSeed(n1, "maintain", 1, "n1")
	editSeed(t, n1, func(s *seed.Seed) {
		s.Etcd.QuotaBackendBytes = seed.MinQuotaBackendBytes
		s.Etcd.AutoMaintain = true
		s.Etcd.AutoCompactionRetention = "0" // only maintain compacts
	})
	n1.start()
	cli := c.client(n1)
	c.voters(cli, 1, 2*time.Minute)
	ctx := t.Context()
	value := strings.Repeat("x", 1<<20)
	acked := map[string]string{}
	var refused error
	var refusedKey, refusedValue string
	for i := 0; refused == nil; i++ {
		require.Less(t, i, 200, "no NOSPACE after 200 MiB of writes to a 64 MiB quota")
		k, v := fmt.Sprintf("k%d", i%4), fmt.Sprintf("%d:%s", i, value)
		if _, err := cli.Put(ctx, k, v); err != nil {
			refused, refusedKey, refusedValue = err, k, v
			continue
		}
		acked[k] = v
	}
	assert.ErrorContains(t, refused, "database space exceeded")
	n1.waitLog(0, "maintain: NOSPACE is raised and the seed allows this node to clear it", time.Minute)
	n1.waitLog(0, "maintain: done", 2*time.Minute)
	_, err := cli.Put(ctx, "after", "1")
	require.NoError(t, err, "writes are accepted again")
	for k, v := range acked {
		r, err := cli.Get(ctx, k)
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1, k)
		// The write that tripped NOSPACE may have been applied (DESIGN §5).
		if got := string(r.Kvs[0].Value); got != v {
			assert.True(t, k == refusedKey && got == refusedValue, "%s lost its acknowledged value", k)
		}
	}
}
