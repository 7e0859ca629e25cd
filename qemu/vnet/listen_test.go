package vnet

import (
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListenOnGateway serves HTTP on the gateway inside the network (as
// the harness's registry does) and fetches it from a guest.
func TestListenOnGateway(t *testing.T) {
	n := testNetwork(t)
	ln, err := n.Listen(5000)
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "registry here: "+r.URL.Path)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	g := leased(t, n, mac1)
	c, err := g.dial(ctxT(t, 10*time.Second), netip.AddrPortFrom(gw, 5000))
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /v2/ HTTP/1.0\r\nHost: 10.88.0.1:5000\r\n\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	body, err := io.ReadAll(c)
	require.NoError(t, err)
	assert.Contains(t, string(body), "200 OK")
	assert.Contains(t, string(body), "registry here: /v2/")
}
