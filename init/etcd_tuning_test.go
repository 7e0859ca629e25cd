package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/seed"
)

// TestContainerEtcdTuning: a node whose seed tunes etcd (a metrics port,
// extra flags, compaction by revision, a log level) runs etcd with them:
// its metrics and health answer over plain HTTP on loopback, the extra
// flags show in etcd's behaviour and metrics, and the node keeps none of
// etcd's entries below the level.
func TestContainerEtcdTuning(t *testing.T) {
	c := newCluster(t, "n1")
	n1 := c.nodes["n1"]
	n1.tune = seed.Etcd{
		MetricsPort:        testenv.FreePort(t),
		LogLevel:           "warn",
		AutoCompactionMode: seed.CompactionRevision, AutoCompactionRetention: "1000",
		ExtraArgs: []string{"--max-request-bytes=262144", "--metrics=extensive"},
	}
	c.writeSeed(n1, "tuned", 1, "n1")
	n1.start()
	n1.waitLog(0, "compaction by revision, keeping the last 1000 revisions; corruption checks on; log level warn; metrics on http://127.0.0.1:", 30*time.Second)
	n1.waitLog(0, "etcd ready", 60*time.Second)
	metrics := fmt.Sprintf("http://127.0.0.1:%d", n1.tune.MetricsPort)

	t.Run("metrics and health over plain HTTP", func(t *testing.T) {
		for _, path := range []string{"/health", "/livez", "/readyz"} {
			code, body := httpGet(t, metrics+path, 30*time.Second)
			assert.Equal(t, http.StatusOK, code, "%s: %s", path, body)
		}
		_, body := httpGet(t, metrics+"/health", time.Second)
		assert.Contains(t, body, `"health":"true"`)
		_, body = httpGet(t, metrics+"/metrics", time.Second)
		assert.True(t, strings.Contains(body, "\netcd_server_has_leader 1\n"), "no etcd_server_has_leader 1 in %d bytes of /metrics", len(body))
		// Read-only: the metrics listener serves no key-value API.
		code, _ := httpGet(t, metrics+"/v3/kv/range", time.Second)
		assert.Equal(t, http.StatusNotFound, code)
	})

	t.Run("--max-request-bytes refuses a larger put", func(t *testing.T) {
		cli := c.client(n1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := cli.Put(ctx, "small", strings.Repeat("x", 100<<10))
		require.NoError(t, err, "100 KiB is under the flag's 256 KiB")
		// etcd's default (1.5 MiB) would take 512 KiB.
		_, err = cli.Put(ctx, "large", strings.Repeat("x", 512<<10))
		require.Error(t, err)
		assert.True(t, errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) || strings.Contains(err.Error(), "too large"), "%v", err)
	})

	t.Run("--metrics=extensive adds the gRPC handling histogram", func(t *testing.T) {
		// Only extensive metrics time each gRPC call (etcd's --metrics).
		_, body := httpGet(t, metrics+"/metrics", time.Second)
		assert.True(t, strings.Contains(body, `grpc_server_handling_seconds_bucket{grpc_method="Put"`), "no Put in grpc_server_handling_seconds in %d bytes of /metrics", len(body))
	})

	t.Run("the node keeps etcd's warnings and up, not its info", func(t *testing.T) {
		levels := map[string]int{}
		for l := range strings.SplitSeq(n1.log(), "\n") {
			if rest, ok := strings.CutPrefix(l, `etcd: {"level":"`); ok {
				level, _, _ := strings.Cut(rest, `"`)
				levels[level]++
			}
		}
		assert.Zero(t, levels["info"], "etcd's info entries kept: %v", levels)
		// etcd warns at every start that its simple auth tokens are not
		// signed: the warnings are kept.
		assert.Positive(t, levels["warn"], "no warnings of etcd's kept: %v", levels)
	})
}

// httpGet polls GET url until it answers, within the deadline, and
// returns the status and body.
func httpGet(t *testing.T, url string, within time.Duration) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				return resp.StatusCode, string(body)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
