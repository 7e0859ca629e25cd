package vnet

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestMetadata: without a metadata service a lease has no route to
// 169.254.169.254; with one, each
// lease routes its /32 through the gateway (option 121), and a guest that
// follows that route reaches the handler, which knows the guest by its
// address.
func TestMetadata(t *testing.T) {
	n := testNetwork(t)
	g := newGuest(t, SwitchSocket(n.Dir()), mac1)
	_, ack := g.lease(ctxT(t, 10*time.Second))
	require.Empty(t, ack.ClasslessStaticRoute(), "a lease routes to a metadata service that is not there")

	require.NoError(t, n.ServeMetadata(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := n.RemoteHost(r)
		fmt.Fprintf(w, "%s %v %s", h.Name, ok, r.URL.Path)
	})))
	g2 := newGuest(t, SwitchSocket(n.Dir()), mac2)
	_, ack = g2.lease(ctxT(t, 10*time.Second))
	routes := ack.ClasslessStaticRoute()
	require.Len(t, routes, 1, ack.Summary())
	assert.Equal(t, "169.254.169.254/32", routes[0].Dest.String())
	assert.Equal(t, gw.String(), routes[0].Router.String())

	// The guest configures its address and the route the lease gave.
	ip, _ := netip.AddrFromSlice(ack.YourIPAddr.To4())
	ones, _ := ack.SubnetMask().Size()
	g2.configure(netip.PrefixFrom(ip, ones), netip.Addr{})
	meta, err := tcpip.NewSubnet(tcpAddr(MetadataAddr), tcpip.MaskFromBytes([]byte{255, 255, 255, 255}))
	require.NoError(t, err)
	g2.stack.AddRoute(tcpip.Route{Destination: meta, Gateway: tcpAddr(gw), NIC: 1})

	c, err := g2.dial(ctxT(t, 10*time.Second), netip.AddrPortFrom(MetadataAddr, 80))
	require.NoError(t, err)
	defer c.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://169.254.169.254/latest/user-data", nil)
	require.NoError(t, req.Write(c))
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "n2 true /latest/user-data", string(body))
}
