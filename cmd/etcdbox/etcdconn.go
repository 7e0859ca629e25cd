package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// etcd's client hides why it cannot reach an endpoint: a request that
// finds none answering ends with its context, "context deadline
// exceeded". So the verbs that talk to etcd first reach every endpoint
// themselves, a TCP connection and a TLS handshake with the admin
// certificate, and name each endpoint that fails and why (refused, TLS,
// no answer in time).

// probeEtcd connects to every endpoint at once, within ctx, and returns
// an error naming each when none completes a TLS handshake; nil when one
// does (the client then uses those that answer).
func probeEtcd(ctx context.Context, endpoints []string, tc *tls.Config) error {
	if len(endpoints) == 0 {
		return errors.New("no etcd endpoint")
	}
	errs := make([]error, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() { errs[i] = probeOne(ctx, ep, tc) })
	}
	wg.Wait()
	var why []string
	for i, err := range errs {
		if err == nil {
			return nil
		}
		why = append(why, endpoints[i]+": "+err.Error())
	}
	return fmt.Errorf("no etcd endpoint answers: %s", strings.Join(why, "; "))
}

// probeOne connects to endpoint (https://host:port) and completes a TLS
// handshake, as etcd's client would (HTTP/2), within ctx.
func probeOne(ctx context.Context, endpoint string, tc *tls.Config) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("not a URL %q", endpoint)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "2379")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer while connecting: %w", err)
		}
		return err
	}
	defer conn.Close()
	cfg := tc.Clone()
	cfg.ServerName = u.Hostname()
	cfg.NextProtos = []string{"h2"}
	if err := tls.Client(conn, cfg).HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("no answer in the TLS handshake (connected): %w", err)
		}
		return fmt.Errorf("TLS handshake: %w", err)
	}
	return nil
}

// etcdFailed names the endpoints a request to etcd went to when it
// failed for want of an answer (the time ran out), and the time bound
// when it was ctx's; etcd's own answers, such as a refusal, go as they
// are.
func etcdFailed(ctx context.Context, err error, endpoints []string, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	err = fmt.Errorf("etcd at %s: %w", strings.Join(endpoints, ", "), err)
	return withinTimeout(ctx, err, timeout)
}
