package nodeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Error is an error answer from a node: its HTTP status and the message of
// its JSON body. Client methods wrap it; find it with errors.As.
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Client talks to one node's API. It is safe for concurrent use.
type Client struct {
	endpoint string
	hc       *http.Client
}

// Response body limits: a status is small, logs are up to MaxLogLines lines.
const (
	maxJSONBody = 1 << 20
	maxLogsBody = 64 << 20
)

// NewClient returns a client for the node at endpoint (https://host:port;
// a bare host:port means https, a missing port DefaultPort) that
// authenticates with the admin certificate in pkiDir (ca.crt, admin.crt,
// admin.key, as `etcdbox pki init` writes them).
func NewClient(endpoint, pkiDir string) (*Client, error) {
	tc, err := AdminTLS(pkiDir)
	if err != nil {
		return nil, err
	}
	return NewClientTLS(endpoint, tc)
}

// NewClientTLS is NewClient with a TLS configuration of the caller's: its
// RootCAs must hold the cluster CA and its Certificates a client
// certificate from it.
func NewClientTLS(endpoint string, tc *tls.Config) (*Client, error) {
	u, err := ParseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		// Never a proxy: the API is reached directly (and tests must only
		// talk to loopback).
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:       tc.Clone(),
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
	return &Client{endpoint: u, hc: &http.Client{Transport: tr}}, nil
}

// ParseEndpoint turns a node API endpoint into its canonical form
// https://host:port: a missing scheme means https, a missing port
// DefaultPort. Other schemes, paths and queries are errors.
func ParseEndpoint(endpoint string) (string, error) {
	s := endpoint
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("node API endpoint %q: %w", endpoint, err)
	}
	switch {
	case u.Scheme != "https":
		return "", fmt.Errorf("node API endpoint %q: scheme %q, want https", endpoint, u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("node API endpoint %q: no host", endpoint)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "", u.User != nil:
		return "", fmt.Errorf("node API endpoint %q: want only https://host:port", endpoint)
	}
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(DefaultPort)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("node API endpoint %q: bad port %q", endpoint, port)
	}
	return "https://" + net.JoinHostPort(u.Hostname(), port), nil
}

// AdminTLS loads the client side of the node API's mutual TLS from pkiDir:
// the cluster CA (ca.crt) as the only trusted root, and the admin
// certificate (admin.crt, admin.key); AdminFiles(pkiDir).Config().
func AdminTLS(pkiDir string) (*tls.Config, error) { return AdminFiles(pkiDir).Config() }

// Endpoint returns the node's endpoint in canonical form.
func (c *Client) Endpoint() string { return c.endpoint }

// Close closes idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Status returns the node's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, PathStatus, nil, http.StatusOK, &st)
	return st, err
}

// textWithHeader is an answer's text body (read as into a bytes.Buffer)
// and its header.
type textWithHeader struct {
	buf bytes.Buffer
	h   http.Header
}

// LogPage is one answer of GET /v1/logs?after=: complete lines, the
// number of the last (the next call's after), how many lines after the
// asked number the node no longer kept, and the ID of the node's boot
// (numbers start again in another).
type LogPage struct {
	Lines   []string
	Last    uint64
	Dropped uint64
	Boot    string
}

// LogsAfter returns the node's complete log lines after line number
// after; newest > 0 keeps only the newest that many (the start of a
// follow: LogsAfter(ctx, 0, n)).
func (c *Client) LogsAfter(ctx context.Context, after uint64, newest int) (LogPage, error) {
	path := PathLogs + "?after=" + strconv.FormatUint(after, 10)
	if newest > 0 {
		path += "&lines=" + strconv.Itoa(newest)
	}
	var page LogPage
	var body textWithHeader
	err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK, &body)
	if err != nil {
		return page, err
	}
	if page.Last, err = strconv.ParseUint(body.h.Get(HeaderLogLast), 10, 64); err != nil {
		return page, fmt.Errorf("GET %s: header %s: %w", path, HeaderLogLast, err)
	}
	if page.Dropped, err = strconv.ParseUint(body.h.Get(HeaderLogDropped), 10, 64); err != nil {
		return page, fmt.Errorf("GET %s: header %s: %w", path, HeaderLogDropped, err)
	}
	page.Boot = body.h.Get(HeaderLogBoot)
	if text := strings.TrimSuffix(body.buf.String(), "\n"); text != "" {
		page.Lines = strings.Split(text, "\n")
	}
	return page, nil
}

// Logs returns the node's last n log lines (the init's and etcd's, oldest
// first); n <= 0 means DefaultLogLines.
func (c *Client) Logs(ctx context.Context, n int) ([]string, error) {
	path := PathLogs
	if n > 0 {
		path += "?lines=" + strconv.Itoa(n)
	}
	var buf bytes.Buffer
	if err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK, &buf); err != nil {
		return nil, err
	}
	text := strings.TrimSuffix(buf.String(), "\n")
	if text == "" {
		return nil, nil
	}
	return strings.Split(text, "\n"), nil
}

// Reboot asks the node to reboot. It returns once the node accepted; the
// node then shuts down in order (leadership transfer, etcd stop, sync).
func (c *Client) Reboot(ctx context.Context) error {
	return c.RebootWith(ctx, RebootRequest{})
}

// RebootWith is Reboot with options (RebootRequest).
func (c *Client) RebootWith(ctx context.Context, req RebootRequest) error {
	var body any
	if req != (RebootRequest{}) {
		body = req
	}
	return c.do(ctx, http.MethodPost, PathReboot, body, http.StatusAccepted, nil)
}

// StageUpgrade asks the node to stage image (pinned by digest, see
// CheckImageRef) into its inactive slot. It returns once the node accepted;
// follow the staging with Upgrade.
func (c *Client) StageUpgrade(ctx context.Context, image string) error {
	return c.do(ctx, http.MethodPost, PathUpgrade, UpgradeRequest{Image: image}, http.StatusAccepted, nil)
}

// HoldUpgrade asks the node to stage image into its inactive slot held:
// complete, but no boot tries it until ArmUpgrade. It returns once the
// node accepted; follow the staging with Upgrade (PhaseHeld).
func (c *Client) HoldUpgrade(ctx context.Context, image string) error {
	return c.do(ctx, http.MethodPost, PathUpgrade, UpgradeRequest{Image: image, Hold: true}, http.StatusAccepted, nil)
}

// ArmUpgrade asks the node to arm the held slot that holds image, so that
// its next boot tries it. It returns once the entry is armed on the ESP.
func (c *Client) ArmUpgrade(ctx context.Context, image string) (UpgradeProgress, error) {
	var p UpgradeProgress
	err := c.do(ctx, http.MethodPost, PathUpgradeArm, ArmRequest{Image: image}, http.StatusOK, &p)
	return p, err
}

// Snapshot asks the node to take an etcd snapshot of its member and keep
// it on DATA. It returns once the snapshot is on the disk.
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	err := c.do(ctx, http.MethodPost, PathSnapshot, nil, http.StatusOK, &s)
	return s, err
}

// Backups lists the snapshots the node keeps, oldest first.
func (c *Client) Backups(ctx context.Context) ([]Snapshot, error) {
	var s []Snapshot
	err := c.do(ctx, http.MethodGet, PathBackups, nil, http.StatusOK, &s)
	return s, err
}

// Backup asks the node to take a backup now: a follower's snapshot,
// verified and kept on its DATA.
func (c *Client) Backup(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	err := c.do(ctx, http.MethodPost, PathBackups, nil, http.StatusOK, &s)
	return s, err
}

// Recover asks the survivor of a lost quorum to become the one member of a
// new cluster (POST /v1/recover) and returns the recovery's state.
func (c *Client) Recover(ctx context.Context, req RecoverRequest) (Recovery, error) {
	var r Recovery
	err := c.do(ctx, http.MethodPost, PathRecover, req, http.StatusOK, &r)
	return r, err
}

// RotateCA applies one phase of a CA rotation on the node (POST
// /v1/pki/rotation) and returns once it is in effect.
func (c *Client) RotateCA(ctx context.Context, req CARotationRequest) (CARotation, error) {
	var r CARotation
	err := c.do(ctx, http.MethodPost, PathCARotation, req, http.StatusOK, &r)
	return r, err
}

// CARotation says where the node is in a CA rotation (GET
// /v1/pki/rotation).
func (c *Client) CARotation(ctx context.Context) (CARotation, error) {
	var r CARotation
	err := c.do(ctx, http.MethodGet, PathCARotation, nil, http.StatusOK, &r)
	return r, err
}

// Restore takes one step of a restore on the node (POST /v1/restore).
func (c *Client) Restore(ctx context.Context, req RestoreRequest) (Recovery, error) {
	var r Recovery
	err := c.do(ctx, http.MethodPost, PathRestore, req, http.StatusOK, &r)
	return r, err
}

// SendRestoreSnapshot sends the snapshot file of the restore token to the
// node (POST /v1/restore/snapshot), which keeps it once it verifies.
func (c *Client) SendRestoreSnapshot(ctx context.Context, token string, f *os.File) (Recovery, error) {
	fi, err := f.Stat()
	if err != nil {
		return Recovery{}, err
	}
	var r Recovery
	err = c.do(ctx, http.MethodPost, PathRestoreSnapshot+"?token="+url.QueryEscape(token), rawBody{f, fi.Size()}, http.StatusOK, &r)
	return r, err
}

// rawBody is a request body sent as it is, not as JSON.
type rawBody struct {
	r    io.Reader
	size int64
}

// GetBackup copies the kept snapshot called name to w and returns the
// SHA-256 the node says etcd appended to it (hex); the caller checks the
// file (backup.Verify).
func (c *Client) GetBackup(ctx context.Context, name string, w io.Writer) (string, error) {
	u := c.endpoint + PathBackups + "?name=" + url.QueryEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %w", u, readError(resp))
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	return resp.Header.Get(HeaderSnapshotSHA256), nil
}

// Decommission asks the node called node to leave the cluster for good:
// it hands leadership over when it leads, removes its own member (under
// the membership lock, only while the voters that remain keep a healthy
// quorum), writes a tombstone so that it never rejoins by itself, and
// powers off. It returns once the member is removed.
func (c *Client) Decommission(ctx context.Context, node, reason string) (Decommissioned, error) {
	var d Decommissioned
	err := c.do(ctx, http.MethodPost, PathDecommission, DecommissionRequest{Node: node, Reason: reason}, http.StatusOK, &d)
	return d, err
}

// Formation returns the node's answer to the formation handshake. Any
// client certificate of the cluster CA may ask.
func (c *Client) Formation(ctx context.Context) (Formation, error) {
	var f Formation
	err := c.do(ctx, http.MethodGet, PathFormation, nil, http.StatusOK, &f)
	return f, err
}

// FormWithout tells the node to form the cluster without the named
// expected initial members (admin). It returns the node's formation
// answer after the change.
func (c *Client) FormWithout(ctx context.Context, without []string) (Formation, error) {
	var f Formation
	err := c.do(ctx, http.MethodPost, PathFormation, FormationRequest{Without: without}, http.StatusOK, &f)
	return f, err
}

// Upgrade returns the progress of the node's upgrade agent.
func (c *Client) Upgrade(ctx context.Context) (UpgradeProgress, error) {
	var p UpgradeProgress
	err := c.do(ctx, http.MethodGet, PathUpgrade, nil, http.StatusOK, &p)
	return p, err
}

// do sends a request with body (JSON, when not nil) and reads an answer of
// status want into out: a *bytes.Buffer takes the raw body, anything else
// is decoded from JSON, nil discards it.
func (c *Client) do(ctx context.Context, method, path string, body any, want int, out any) error {
	u := c.endpoint + path
	err := c.roundTrip(ctx, method, u, body, want, out)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	return nil
}

func (c *Client) roundTrip(ctx context.Context, method, u string, body any, want int, out any) error {
	var rd io.Reader
	raw, isRaw := body.(rawBody)
	switch {
	case isRaw:
		rd = raw.r
	case body != nil:
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	switch {
	case isRaw:
		req.ContentLength = raw.size
		req.Header.Set("Content-Type", "application/octet-stream")
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	req, stage := traced(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		// url.Error repeats the method and URL that do adds.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no answer %s: %w", stage(), err)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return readError(resp)
	}
	if t, ok := out.(*textWithHeader); ok {
		t.h = resp.Header
		out = &t.buf
	}
	switch out := out.(type) {
	case nil:
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSONBody))
		return nil
	case *bytes.Buffer:
		n, err := io.Copy(out, io.LimitReader(resp.Body, maxLogsBody+1))
		if err != nil {
			return fmt.Errorf("read body: %w", err)
		}
		if n > maxLogsBody {
			return fmt.Errorf("read body: longer than %d bytes", maxLogsBody)
		}
		return nil
	default:
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBody)).Decode(out); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		return nil
	}
}

// readError turns an error answer into an *Error, with the JSON body's
// message, or the start of a body that is not JSON.
func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb ErrorBody
	msg := ""
	if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
		msg = eb.Error
	} else {
		msg = strings.TrimSpace(string(b))
		if len(msg) > 512 {
			msg = msg[:512] + "..."
		}
	}
	if msg == "" {
		msg = "no message"
	}
	return &Error{StatusCode: resp.StatusCode, Message: msg}
}

// traced adds a trace to req that follows the request's stages; stage
// says where it is ("while connecting", "in the TLS handshake", ...), for
// a request that ran out of time.
func traced(req *http.Request) (*http.Request, func() string) {
	var mu sync.Mutex
	at := "while connecting"
	set := func(s string) { mu.Lock(); at = s; mu.Unlock() }
	trace := &httptrace.ClientTrace{
		ConnectStart:      func(string, string) { set("while connecting") },
		TLSHandshakeStart: func() { set("in the TLS handshake (connected)") },
		GotConn:           func(httptrace.GotConnInfo) { set("while sending the request") },
		WroteRequest:      func(httptrace.WroteRequestInfo) { set("while waiting for the answer (request sent)") },
	}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace)), func() string { mu.Lock(); defer mu.Unlock(); return at }
}
