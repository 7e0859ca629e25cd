package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// nodeTargets are the node APIs a verb asks, and the admin certificate
// it asks with: a local cluster's nodes with --dir (and DIR/pki unless
// the TLS flags say otherwise), else --endpoints with the TLS flags
// (required then). The files are loaded once here, so that a bad one is
// one error rather than one per node.
func nodeTargets(dir string, tf tlsFlags, endpoints []string) ([]statusTarget, nodeapi.TLSFiles, error) {
	var targets []statusTarget
	if dir != "" {
		var err error
		if targets, err = clusterTargets(dir); err != nil {
			return nil, nodeapi.TLSFiles{}, err
		}
	}
	files, _, err := tf.resolve(dir)
	if err != nil {
		return nil, files, err
	}
	if _, err := files.Config(); err != nil {
		return nil, files, err
	}
	if dir != "" {
		return targets, files, nil
	}
	for _, e := range endpoints {
		u, err := nodeapi.ParseEndpoint(e)
		if err != nil {
			return nil, files, err
		}
		targets = append(targets, statusTarget{name: u, endpoint: u})
	}
	return targets, files, nil
}

// withinTimeout adds how long it waited to err when ctx, whose deadline
// timeout set, ran out.
func withinTimeout(ctx context.Context, err error, timeout time.Duration) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w (waited %s)", err, timeout.Round(time.Millisecond))
	}
	return err
}
