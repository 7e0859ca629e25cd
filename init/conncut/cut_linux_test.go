package conncut

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCutRealSockets: this process's own server side of two loopback
// connections (IPv4 and IPv6) is found by its port and shut down, and
// each client reads the end of its stream; the listener and the clients'
// own sockets are left alone.
func TestCutRealSockets(t *testing.T) {
	for _, network := range []struct{ name, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(network.name, func(t *testing.T) {
			ln, err := net.Listen(network.name, network.addr)
			if err != nil && network.name == "tcp6" {
				t.Skipf("no IPv6 loopback: %v", err)
			}
			require.NoError(t, err)
			defer ln.Close()
			port := uint16(ln.Addr().(*net.TCPAddr).Port)

			client, server := dialPair(t, ln)
			defer client.Close()
			defer server.Close()

			conns, err := List("/proc", os.Getpid(), []uint16{port})
			require.NoError(t, err)
			require.Len(t, conns, 1, "the server side only: not the listener, not the client")
			assert.Equal(t, client.LocalAddr().(*net.TCPAddr).AddrPort().Port(), conns[0].Remote.Port())

			n, err := Cut(os.Getpid(), conns)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			require.NoError(t, client.SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err = client.Read(make([]byte, 1))
			assert.True(t, errors.Is(err, io.EOF), "the client reads the end of the stream, got %v", err)

			// The listener still accepts.
			again, other := dialPair(t, ln)
			again.Close()
			other.Close()

			// Closed since List: its descriptor is gone, or another file's.
			server.Close()
			n, err = Cut(os.Getpid(), conns)
			require.NoError(t, err, "a connection closed since List is not an error")
			assert.Equal(t, 0, n)
		})
	}
}

// dialPair connects to ln and returns both ends.
func dialPair(t *testing.T, ln net.Listener) (client, server net.Conn) {
	t.Helper()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	client, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
	require.NoError(t, err)
	return client, <-accepted
}
