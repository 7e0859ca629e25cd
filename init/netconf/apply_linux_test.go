package netconf

import (
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestDown sets links down in a network namespace of the test's own, with
// two links up: both go down, and a link that is gone is named in
// the error while the others still go down.
func TestDown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	runtime.LockOSThread() // the namespace is the thread's; the thread dies with the test goroutine
	orig, err := netns.Get()
	require.NoError(t, err)
	defer orig.Close()
	ns, err := netns.New() // also switches this thread into it
	require.NoError(t, err)
	defer ns.Close()
	defer func() { _ = netns.Set(orig) }()
	h, err := netlink.NewHandleAt(ns)
	require.NoError(t, err)
	defer h.Close()

	// A veth pair: the host's kernel may have no dummy links.
	require.NoError(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nic0"}, PeerName: "nic1"}))
	var links []netlink.Link
	for _, name := range []string{"nic0", "nic1"} {
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		require.NoError(t, h.LinkSetUp(l))
		links = append(links, l)
	}
	up := func(name string) bool {
		l, err := h.LinkByName(name)
		require.NoError(t, err)
		return l.Attrs().RawFlags&1 != 0 // IFF_UP
	}
	require.True(t, up("nic0"))
	require.True(t, up("nic1"))

	gone := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "gone0", Index: 9999}}
	err = Down(h, []netlink.Link{links[0], gone, links[1]})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set gone0 down: ")
	assert.False(t, up("nic0"), "nic0 still up")
	assert.False(t, up("nic1"), "nic1 still up")

	require.NoError(t, Down(h, links), "links already down")
}
