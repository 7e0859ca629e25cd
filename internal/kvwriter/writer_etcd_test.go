package kvwriter

import (
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
