// Package etcdhttp reads what etcd serves only over HTTP: the cluster
// version of its /version page. etcdbox's members serve their HTTP
// endpoints on a port of their own (seed.Etcd.HTTPPort), apart from the
// gRPC client port.
package etcdhttp

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ClusterVersion reads etcdcluster from the /version page of the etcd
// whose HTTP endpoints are at base (https://host:port), with tc.
// etcd says "not_decided" before its cluster has agreed on a version;
// that, and a page without one, is an error.
func ClusterVersion(ctx context.Context, tc *tls.Config, base string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := strings.TrimSuffix(base, "/") + "/version"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	var rt http.RoundTripper = &http.Transport{TLSClientConfig: tc.Clone(), Proxy: nil, ForceAttemptHTTP2: true}
	hc := &http.Client{Transport: rt}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", u, resp.Status)
	}
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&v); err != nil {
		return "", fmt.Errorf("%s: %w", u, err)
	}
	if v.Cluster == "" || v.Cluster == "not_decided" {
		return "", fmt.Errorf("%s: no cluster version", u)
	}
	return v.Cluster, nil
}
