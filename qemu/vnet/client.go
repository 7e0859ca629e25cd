package vnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
)

// Client talks to the control API of a network that Serve runs,
// possibly in another process.
type Client struct {
	sock string
	hc   *http.Client
}

// NewClient returns a client for the network serving dir.
func NewClient(dir string) *Client {
	sock := ControlSocket(dir)
	return &Client{sock: sock, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}}
}

// Wait waits until the network answers, polling its control socket
// (which may not exist yet: the process that serves it is starting).
func (c *Client) Wait(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		_, err := c.Status(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the network on %s: %w (%v)", c.sock, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Status returns the network's state.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	err := c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
	return s, err
}

// Stats returns the network's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, "/v1/stats", nil, &s)
	return s, err
}

// AddHost adds or replaces a host (see Network.AddHost).
func (c *Client) AddHost(ctx context.Context, h Host) error {
	return c.do(ctx, http.MethodPost, "/v1/hosts", h, nil)
}

// RemoveHost removes a host (see Network.RemoveHost).
func (c *Client) RemoveHost(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/hosts/"+url.PathEscape(name), nil, nil)
}

// Forward adds a forward from host (default 127.0.0.1:0) to guest and
// returns the address it listens on (see Network.Forward).
func (c *Client) Forward(ctx context.Context, host string, guest netip.AddrPort) (netip.AddrPort, error) {
	var f Forward
	err := c.do(ctx, http.MethodPost, "/v1/forwards", map[string]any{"host": host, "guest": guest}, &f)
	return f.Host, err
}

// RemoveForward stops the forward listening on host.
func (c *Client) RemoveForward(ctx context.Context, host netip.AddrPort) error {
	return c.do(ctx, http.MethodDelete, "/v1/forwards/"+url.PathEscape(host.String()), nil, nil)
}

// SetSRV replaces the SRV records; nil restores the generated ones (see
// Network.SetSRV).
func (c *Client) SetSRV(ctx context.Context, records []SRV) error {
	return c.do(ctx, http.MethodPut, "/v1/srv", records, nil)
}

// Partition splits the network into groups of hosts; no groups heals it
// (see Network.Partition).
func (c *Client) Partition(ctx context.Context, groups ...[]string) error {
	if groups == nil {
		groups = [][]string{}
	}
	return c.do(ctx, http.MethodPut, "/v1/partition", groups, nil)
}

// CutOneWay adds a one-way cut (see Network.CutOneWay); Partition with no
// groups heals it.
func (c *Client) CutOneWay(ctx context.Context, cut OneWay) error {
	return c.do(ctx, http.MethodPost, "/v1/one-way", cut, nil)
}

// Impair degrades hosts' links (see Network.Impair); Partition with no
// groups heals it.
func (c *Client) Impair(ctx context.Context, im Impairment) error {
	return c.do(ctx, http.MethodPost, "/v1/impair", im, nil)
}

// Shutdown stops the network and returns once it has stopped: its VMs
// are disconnected and its switch socket is gone.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/shutdown", nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://vnet"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("network %s: %s %s: %w", c.sock, method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("network %s: %s %s: %w", c.sock, method, path, err)
	}
	if resp.StatusCode >= 300 {
		var e apiError
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = resp.Status
		}
		return &remoteError{msg: "network: " + e.Error, err: sentinels[e.Code]}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("network %s: %s %s: %w", c.sock, method, path, err)
		}
	}
	return nil
}

// remoteError is an error the network reported; it unwraps to the
// sentinel the server named, so errors.Is works across the API.
type remoteError struct {
	msg string
	err error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.err }
