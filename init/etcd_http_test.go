package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/etcdhttp"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/seed"
)

// TestContainerEtcdHTTPPort: etcd serves gRPC alone on the client port
// and its HTTP endpoints on the seed's etcd.httpPort, behind the same
// mutual TLS, and the node reports the cluster version it reads there; a
// seed whose httpPort is the client port gets etcd's shared listener.
func TestContainerEtcdHTTPPort(t *testing.T) {
	c := newCluster(t, "split", "shared")
	split, shared := c.nodes["split"], c.nodes["shared"]
	shared.tune = seed.Etcd{HTTPPort: shared.clientPort}
	c.writeSeed(split, "split", 1, "split")
	c.writeSeed(shared, "shared", 1, "shared")
	split.start()
	shared.start()
	split.waitLog(0, fmt.Sprintf("gRPC alone on port %d, HTTP on %d", split.clientPort, split.httpPort), 30*time.Second)
	split.waitLog(0, "etcd ready", 60*time.Second)
	shared.waitLog(0, "etcd ready", 60*time.Second)
	admin := c.adminTLS()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("split: HTTP on its own port, gRPC alone on the client port", func(t *testing.T) {
		_, err := c.client(split).Put(ctx, "k", "v")
		require.NoError(t, err, "gRPC on the client port")
		httpBase := "https://127.0.0.1:" + strconv.Itoa(split.httpPort)
		code, body := tlsGet(t, admin, httpBase+"/metrics")
		require.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "\netcd_server_has_leader 1\n")
		code, body = tlsGet(t, admin, split.endpoint()+"/metrics")
		assert.NotEqual(t, http.StatusOK, code, "the client port serves gRPC alone, yet /metrics answered: %.200s", body)
		// The same mutual TLS: no client certificate, no answer.
		_, err = (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: admin.RootCAs}}}).Get(httpBase + "/metrics")
		assert.Error(t, err, "/metrics without a client certificate")

		want, err := etcdhttp.ClusterVersion(ctx, admin, httpBase)
		require.NoError(t, err)
		api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(split.apiPort), c.pkiDir)
		require.NoError(t, err)
		var got string
		for deadline := time.Now().Add(30 * time.Second); got == "" && time.Now().Before(deadline); {
			st, err := api.Status(ctx)
			if err == nil {
				got = st.Member.ClusterVersion
			}
			if got == "" {
				time.Sleep(200 * time.Millisecond)
			}
		}
		assert.Equal(t, want, got, "the node API's cluster version")
	})

	t.Run("shared: etcd's one listener for gRPC and HTTP", func(t *testing.T) {
		_, err := c.client(shared).Put(ctx, "k", "v")
		require.NoError(t, err)
		code, body := tlsGet(t, admin, shared.endpoint()+"/metrics")
		require.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, "\netcd_server_has_leader 1\n")
		assert.NotContains(t, shared.log(), "gRPC alone")
	})
}

// tlsGet makes one GET with tc and returns the status and body; a request
// that fails returns status 0 and the error's text.
func tlsGet(t *testing.T, tc *tls.Config, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc.Clone(), ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
