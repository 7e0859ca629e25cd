package metadata

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	fake "github.com/etcdbox/etcdbox/qemu/metadata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const userData = "cluster: demo\n"

// recorder serves h on loopback and keeps every request's method, path
// and headers, in order.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func serve(t *testing.T, h http.Handler) (*Client, *recorder) {
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, r.Clone(context.Background()))
		rec.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return New(srv.URL), rec
}

// lines are the requests as "METHOD path".
func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, q := range r.reqs {
		out = append(out, q.Method+" "+q.URL.Path)
	}
	return out
}

func TestEC2(t *testing.T) {
	c, rec := serve(t, fake.EC2(fake.Instance{Name: "etcd-a", UserData: []byte(userData)}))
	r, err := c.EC2(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Equal(t, userData, string(r.UserData))
	assert.Equal(t, "etcd-a", r.Name)
	assert.Equal(t, []string{"PUT /latest/api/token", "GET /latest/user-data", "GET /latest/meta-data/tags/instance/Name"}, rec.lines())
	for _, q := range rec.reqs {
		if q.Method == http.MethodGet {
			assert.NotEmpty(t, q.Header.Get(ec2TokenHeader), "IMDSv1: a GET without a token: %s", q.URL.Path)
		}
	}

	// No user data: EC2 is here without a seed; no Name tag: the host name.
	c, _ = serve(t, fake.EC2(fake.Instance{}))
	r, err = c.EC2(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Nil(t, r.UserData)
	assert.Equal(t, "ip-10-0-0-1.ec2.internal", r.Name)
}

// TestEC2V1OnlyRefused: an IMDS without the token flow is refused, and
// never asked anything without a token.
func TestEC2V1OnlyRefused(t *testing.T) {
	c, rec := serve(t, fake.EC2V1Only(fake.Instance{Name: "n", UserData: []byte(userData)}))
	r, err := c.EC2(t.Context())
	require.ErrorIs(t, err, ErrProtocol)
	assert.Contains(t, err.Error(), "405")
	assert.Nil(t, r.UserData)
	assert.Equal(t, []string{"PUT /latest/api/token"}, rec.lines(), "no GET after the token flow failed")
}

func TestGCE(t *testing.T) {
	c, rec := serve(t, fake.GCE(fake.Instance{Name: "etcd-g", UserData: []byte(userData)}))
	r, err := c.GCE(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Equal(t, userData, string(r.UserData))
	assert.Equal(t, "etcd-g", r.Name)
	for _, q := range rec.reqs {
		assert.Equal(t, "Google", q.Header.Get("Metadata-Flavor"))
	}

	c, _ = serve(t, fake.GCE(fake.Instance{Name: "etcd-g"}))
	r, err = c.GCE(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Nil(t, r.UserData)

	// Without Metadata-Flavor: Google on the answer: refused.
	c, _ = serve(t, fake.GCENoFlavor(fake.Instance{Name: "etcd-g", UserData: []byte(userData)}))
	r, err = c.GCE(t.Context())
	require.ErrorIs(t, err, ErrProtocol)
	assert.Contains(t, err.Error(), "without Metadata-Flavor: Google")
	assert.Nil(t, r.UserData)
}

func TestAzure(t *testing.T) {
	c, rec := serve(t, fake.Azure(fake.Instance{Name: "etcd-z", UserData: []byte(userData)}))
	r, err := c.Azure(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Equal(t, userData, string(r.UserData), "decoded from base64")
	assert.Equal(t, "etcd-z", r.Name)
	for _, q := range rec.reqs {
		assert.Equal(t, "true", q.Header.Get("Metadata"))
	}

	c, _ = serve(t, fake.Azure(fake.Instance{Name: "etcd-z"}))
	r, err = c.Azure(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Empty(t, r.UserData)

	// Not base64: refused.
	c, _ = serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "cluster: x\n") }))
	_, err = c.Azure(t.Context())
	require.ErrorIs(t, err, ErrProtocol)
}

func TestOpenStack(t *testing.T) {
	in := fake.Instance{Name: "etcd-o", UserData: []byte(userData)}
	c, _ := serve(t, fake.OpenStack(in))
	r, err := c.OpenStack(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Equal(t, userData, string(r.UserData))
	assert.Equal(t, "etcd-o", r.Name)

	c, _ = serve(t, fake.OpenStack(fake.Instance{Name: "etcd-o"}))
	r, err = c.OpenStack(t.Context())
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Nil(t, r.UserData)
	assert.Equal(t, "etcd-o", r.Name)

	// The config drive's tree.
	dir := t.TempDir()
	require.NoError(t, fake.WriteConfigDrive(dir, in))
	r, err = ReadConfigDrive(dir)
	require.NoError(t, err)
	assert.Equal(t, userData, string(r.UserData))
	assert.Equal(t, "etcd-o", r.Name)
	empty := t.TempDir()
	require.NoError(t, fake.WriteConfigDrive(empty, fake.Instance{Name: "etcd-o"}))
	r, err = ReadConfigDrive(empty)
	require.NoError(t, err)
	assert.True(t, r.Here)
	assert.Nil(t, r.UserData)
}

// cloud serves the four protocols at one base, as 169.254.169.254 does
// in a cloud: each given handler under its cloud's paths, 404 elsewhere.
func cloud(ec2, gce, azure, openstack http.Handler) http.Handler {
	mux := http.NewServeMux()
	for prefix, h := range map[string]http.Handler{"/latest/": ec2, "/computeMetadata/": gce, "/metadata/": azure, "/openstack/": openstack} {
		if h != nil {
			mux.Handle(prefix, h)
		}
	}
	return mux
}

type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestFindOrder: the sources are asked in their fixed order; a broken
// IMDS is refused and logged, clouds that are not here are passed, and the
// first with a seed gives it.
func TestFindOrder(t *testing.T) {
	in := fake.Instance{Name: "etcd-o", UserData: []byte(userData)}
	c, rec := serve(t, cloud(fake.EC2V1Only(in), nil, nil, fake.OpenStack(in)))
	var l logs
	r, ok := Find(t.Context(), c.Sources(), l.printf)
	require.True(t, ok, l.String())
	assert.Equal(t, "openstack", r.ID)
	assert.Equal(t, openstackName, r.Source)
	assert.Equal(t, userData, string(r.UserData))
	assert.Equal(t, []string{
		"PUT /latest/api/token",
		"GET /computeMetadata/v1/instance/attributes/user-data",
		"GET /metadata/instance/compute/userData",
		"GET /openstack/latest/user_data",
		"GET /openstack/latest/meta_data.json",
	}, rec.lines())
	assert.Regexp(t, `cloud metadata: EC2 IMDSv2: refused: .*405.*going on to the next source`, l.String())
	assert.Contains(t, l.String(), "absent: GCE metadata: not here: GET /computeMetadata/v1/instance/attributes/user-data: 404 without Metadata-Flavor")

	// A GCE without its header is refused; Azure after it gives the seed.
	c, _ = serve(t, cloud(nil, fake.GCENoFlavor(in), fake.Azure(in), fake.OpenStack(in)))
	l = logs{}
	r, ok = Find(t.Context(), c.Sources(), l.printf)
	require.True(t, ok, l.String())
	assert.Equal(t, "azure", r.ID)
	assert.Contains(t, l.String(), "GCE metadata: refused")
}

// TestFindStopsAtTheCloudHere: once a cloud answers without a seed, no
// later source is asked, and its name is kept.
func TestFindStopsAtTheCloudHere(t *testing.T) {
	c, rec := serve(t, cloud(fake.EC2(fake.Instance{Name: "etcd-e"}), fake.GCE(fake.Instance{UserData: []byte(userData)}), nil, nil))
	var l logs
	r, ok := Find(t.Context(), c.Sources(), l.printf)
	require.True(t, ok)
	assert.Equal(t, "ec2", r.ID)
	assert.Nil(t, r.UserData)
	assert.Equal(t, "etcd-e", r.Name)
	for _, line := range rec.lines() {
		assert.True(t, strings.HasPrefix(line, "PUT /latest/") || strings.HasPrefix(line, "GET /latest/"), line)
	}

	// Nothing listens at all: every source absent after one refused
	// connection.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // connection refused from now on
	l = logs{}
	start := time.Now()
	_, ok = Find(t.Context(), New("http://"+addr).Sources(), l.printf)
	assert.False(t, ok)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Regexp(t, `absent: EC2 IMDSv2: not here: PUT /latest/api/token: .*refused \(nothing listens there\); GCE metadata: not asked; Azure IMDS: not asked; OpenStack metadata service: not asked`, l.String())
}

// TestFindDeadline: a service that accepts and never answers holds the
// boot no longer than the overall deadline.
func TestFindDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	c := New("http://" + ln.Addr().String())
	c.RequestTimeout = time.Hour // only the overall deadline acts
	const deadline = 500 * time.Millisecond
	// start is read before the deadline is set, so it is never late.
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	defer cancel()
	var l logs
	_, ok := Find(ctx, c.Sources(), l.printf)
	elapsed := time.Since(start)
	assert.False(t, ok)
	assert.GreaterOrEqual(t, elapsed, deadline)
	assert.Less(t, elapsed, deadline+3*time.Second, "held the boot past the deadline")
	assert.Contains(t, l.String(), "not asked (deadline)")
}

// TestFindHangingSourcePassed: a source that never answers costs one
// request timeout; the next source still gives its seed.
func TestFindHangingSourcePassed(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	hangs := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	c, _ := serve(t, cloud(hangs, fake.GCE(fake.Instance{Name: "etcd-g", UserData: []byte(userData)}), nil, nil))
	c.RequestTimeout = 300 * time.Millisecond
	var l logs
	start := time.Now()
	r, ok := Find(t.Context(), c.Sources(), l.printf)
	require.True(t, ok, l.String())
	assert.Equal(t, "gce", r.ID)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Regexp(t, `absent: EC2 IMDSv2: not here: PUT /latest/api/token: .*deadline exceeded`, l.String())
}
