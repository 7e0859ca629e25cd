//go:build linux

package main

import (
	"testing"

	"github.com/etcdbox/etcdbox/seed"
)

// TestHTTPPortIsANodes: the TLS floor serves etcd's HTTP endpoints where a
// node does, so that its client port, as a node's, serves gRPC alone.
func TestHTTPPortIsANodes(t *testing.T) {
	if httpPort != seed.DefaultHTTPPort {
		t.Errorf("the floor's etcd HTTP port is %d, a node's %d", httpPort, seed.DefaultHTTPPort)
	}
}
