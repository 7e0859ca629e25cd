package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// PeerActive reports whether node's etcd counts its connection to the
// member peerID as active (etcd_network_active_peers, from its /metrics):
// how a member reports a peer it lost. It fails when node does not
// answer or reports no such connection.
func (c *Cluster) PeerActive(ctx context.Context, node string, peerID uint64) (bool, error) {
	page, err := c.metrics(ctx, node)
	if err != nil {
		return false, err
	}
	return peerActive(page, peerID)
}

// SlowWALSyncs returns how many of the WAL syncs node's etcd made since it
// started took longer than over, from its etcd_disk_wal_fsync_duration_seconds
// histogram: the count less the bucket at over, which must be one of the
// histogram's bounds (1 ms doubling to 8.192 s: 256 ms, say).
func (c *Cluster) SlowWALSyncs(ctx context.Context, node string, over time.Duration) (int, error) {
	page, err := c.metrics(ctx, node)
	if err != nil {
		return 0, err
	}
	n, err := histogramOver(page, "etcd_disk_wal_fsync_duration_seconds", over)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", node, err)
	}
	return n, nil
}

// metrics fetches the /metrics page of node's etcd.
func (c *Cluster) metrics(ctx context.Context, node string) (string, error) {
	n, err := c.node(node)
	if err != nil {
		return "", err
	}
	tc, err := c.TLS()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, probeLimit)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.HTTPEndpoint()+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("metrics of %s: %w", node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("metrics of %s: %s", node, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("metrics of %s: %w", node, err)
	}
	return string(b), nil
}

// histogramOver reads, from a metrics page, how many observations of the
// unlabelled histogram name were above the bucket bound over.
func histogramOver(page, name string, over time.Duration) (int, error) {
	le := `{le="` + strconv.FormatFloat(over.Seconds(), 'g', -1, 64) + `"} `
	count, bucket := -1.0, -1.0
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+"_count "); ok {
			count, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		} else if v, ok := strings.CutPrefix(line, name+"_bucket"+le); ok {
			bucket, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	switch {
	case count < 0:
		return 0, fmt.Errorf("no %s_count", name)
	case bucket < 0:
		return 0, fmt.Errorf("no %s bucket le=%q", name, strings.TrimSuffix(strings.TrimPrefix(le, `{le="`), `"} `))
	}
	return int(count - bucket), nil
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
