package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// PeerActive reports whether node's etcd counts its connection to the
// member peerID as active (etcd_network_active_peers, from its /metrics):
// how a member reports a peer it lost. It fails when node does not
// answer or reports no such connection.
func (c *Cluster) PeerActive(ctx context.Context, node string, peerID uint64) (bool, error) {
	n, err := c.node(node)
	if err != nil {
		return false, err
	}
	tc, err := c.TLS()
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeLimit)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.Endpoint()+"/metrics", nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("metrics of %s: %w", node, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return false, fmt.Errorf("metrics of %s: %w", node, err)
	}
	return peerActive(string(b), peerID)
}

// peerActive reads etcd_network_active_peers for the remote member id
// (etcd labels members in unpadded hex) from a metrics page.
func peerActive(metrics string, id uint64) (bool, error) {
	remote := fmt.Sprintf(`Remote="%x"`, id)
	for _, line := range strings.Split(metrics, "\n") {
		labels, ok := strings.CutPrefix(line, "etcd_network_active_peers{")
		if !ok || !strings.Contains(labels, remote) {
			continue
		}
		_, v, _ := strings.Cut(labels, "} ")
		return strings.TrimSpace(v) != "0", nil
	}
	return false, fmt.Errorf("no etcd_network_active_peers for member %x", id)
}

// WaitPeerLost waits until node reports its connection to member peerID
// inactive, and returns how long that took.
func (c *Cluster) WaitPeerLost(ctx context.Context, node string, peerID uint64) (time.Duration, error) {
	start := time.Now()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last error
	for {
		active, err := c.PeerActive(ctx, node, peerID)
		if err == nil && !active {
			return time.Since(start), nil
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s still reports member %x active: %w (last: %v)", node, peerID, ctx.Err(), last)
		case <-t.C:
		}
	}
}
