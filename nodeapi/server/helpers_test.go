package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/pki"
)

// fakeNode records the actions asked of it.
type fakeNode struct {
	mu        sync.Mutex
	status    nodeapi.Status
	statusErr error
	logs      []string
	dropLines uint64
	rebootErr error
	stageErr  error
	reboots   int
	rebootReq nodeapi.RebootRequest
	staged    []string
	held      []string
	armed     []string
	armErr    error
	progress  nodeapi.UpgradeProgress
	snapshot  nodeapi.Snapshot
	snapErr   error
	snapshots int
	calls     int
	// decommission answers Decommission; decommissioned records requests.
	decommission    nodeapi.Decommissioned
	decommissionErr error
	decommissioned  []nodeapi.DecommissionRequest
	formation       nodeapi.Formation
	formErr         error
	// backups are the kept snapshots by name, with their bytes.
	backups  map[string][]byte
	backedUp int
	// recovery answers Recover; recovers records requests.
	recovery   nodeapi.Recovery
	recoverErr error
	recovers   []nodeapi.RecoverRequest
	restores   []nodeapi.RestoreRequest
	received   []string // token:body of each snapshot sent
	rotations  []nodeapi.CARotationRequest
}

func (f *fakeNode) CARotation() (nodeapi.CARotation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return nodeapi.CARotation{Phase: nodeapi.RotationTrust}, nil
}

func (f *fakeNode) RotateCA(_ context.Context, req nodeapi.CARotationRequest) (nodeapi.CARotation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.rotations = append(f.rotations, req)
	return nodeapi.CARotation{ID: "0123456789abcdef", Phase: req.Phase}, nil
}

func (f *fakeNode) Restore(_ context.Context, req nodeapi.RestoreRequest) (nodeapi.Recovery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.restores = append(f.restores, req)
	return f.recovery, f.recoverErr
}

func (f *fakeNode) ReceiveSnapshot(_ context.Context, token string, r io.Reader) (nodeapi.Recovery, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nodeapi.Recovery{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.received = append(f.received, token+":"+string(b))
	return f.recovery, f.recoverErr
}

func (f *fakeNode) Recover(_ context.Context, req nodeapi.RecoverRequest) (nodeapi.Recovery, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.recoverErr != nil {
		return nodeapi.Recovery{}, f.recoverErr
	}
	f.recovers = append(f.recovers, req)
	return f.recovery, nil
}

func (f *fakeNode) Decommission(_ context.Context, req nodeapi.DecommissionRequest) (nodeapi.Decommissioned, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.decommissionErr != nil {
		return nodeapi.Decommissioned{}, f.decommissionErr
	}
	f.decommissioned = append(f.decommissioned, req)
	return f.decommission, nil
}

func (f *fakeNode) Formation(context.Context) (nodeapi.Formation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.formation, nil
}

func (f *fakeNode) FormWithout(_ context.Context, names []string) (nodeapi.Formation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.formErr != nil {
		return nodeapi.Formation{}, f.formErr
	}
	f.formation.Without = names
	return f.formation, nil
}

func (f *fakeNode) Snapshot(context.Context) (nodeapi.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.snapErr != nil {
		return nodeapi.Snapshot{}, f.snapErr
	}
	f.snapshots++
	return f.snapshot, nil
}

func (f *fakeNode) Backups() ([]nodeapi.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []nodeapi.Snapshot{}
	for _, name := range slices.Sorted(maps.Keys(f.backups)) {
		out = append(out, nodeapi.Snapshot{Name: name, Size: int64(len(f.backups[name])), SHA256: "sum-of-" + name})
	}
	return out, nil
}

func (f *fakeNode) OpenBackup(name string) (io.ReadCloser, nodeapi.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.backups[name]
	if !ok {
		return nil, nodeapi.Snapshot{}, fs.ErrNotExist
	}
	return io.NopCloser(bytes.NewReader(b)), nodeapi.Snapshot{Name: name, Size: int64(len(b)), SHA256: "sum-of-" + name}, nil
}

func (f *fakeNode) Backup(context.Context) (nodeapi.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backedUp++
	return nodeapi.Snapshot{Name: "etcd-new.db"}, nil
}

func (f *fakeNode) Status(context.Context) (nodeapi.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.status, f.statusErr
}

func (f *fakeNode) Logs(int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.logs
}

// LogsSince numbers f.logs from 1; the first dropLines of them count as
// no longer held.
func (f *fakeNode) LogsSince(seq uint64) ([]string, uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	total := uint64(len(f.logs))
	if seq > total {
		seq = 0
	}
	var dropped uint64
	if seq < f.dropLines {
		dropped, seq = f.dropLines-seq, f.dropLines
	}
	return append([]string(nil), f.logs[seq:]...), total, dropped
}

func (f *fakeNode) Reboot(req nodeapi.RebootRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.rebootReq = req
	if f.rebootErr != nil {
		return f.rebootErr
	}
	f.reboots++
	return nil
}

func (f *fakeNode) StageUpgrade(_ context.Context, ref string, hold bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.stageErr != nil {
		return f.stageErr
	}
	if hold {
		f.held = append(f.held, ref)
	} else {
		f.staged = append(f.staged, ref)
	}
	f.progress = nodeapi.UpgradeProgress{Target: ref, Phase: nodeapi.PhasePulling}
	return nil
}

func (f *fakeNode) ArmUpgrade(_ context.Context, ref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.armErr != nil {
		return f.armErr
	}
	f.armed = append(f.armed, ref)
	f.progress = nodeapi.UpgradeProgress{Target: ref, Phase: nodeapi.PhaseStaged}
	return nil
}

func (f *fakeNode) Upgrade() nodeapi.UpgradeProgress {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.progress
}

func (f *fakeNode) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// testPKI is a cluster CA with the files of one node and of its clients.
type testPKI struct {
	ca *pki.CA
	// nodeCA is a node CA under ca, as seeds carry it.
	nodeCA *pki.CA
	// admin holds ca.crt, admin.crt and admin.key (pki init's layout);
	// node holds ca.crt, server.crt and server.key (the node's state/pki).
	admin, node string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{admin: filepath.Join(t.TempDir(), "pki"), node: filepath.Join(t.TempDir(), "state", "pki")}
	require.NoError(t, pki.Init(p.admin, false))
	ca, err := pki.LoadCAFiles(p.admin)
	require.NoError(t, err)
	p.ca = ca
	p.nodeCA, err = ca.IssueNodeCA(pki.NodeScope{Names: []string{"n1", "n2"}}, 0)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(p.node, 0o700))
	require.NoError(t, writeDir(p.node, map[string][]byte{server.CACertFile: ca.CertPEM()}))
	p.issueServer(t)
	return p
}

// issueServer writes a new server leaf for node n1, from the node CA,
// into the node's dir.
func (p *testPKI) issueServer(t *testing.T) {
	t.Helper()
	dns, ips := pki.NodeSANs("n1", nil, nil)
	cert, key, err := p.nodeCA.Issue(pki.Leaf{CommonName: "n1", DNSNames: dns, IPs: ips, Server: true, Client: true})
	require.NoError(t, err)
	require.NoError(t, writeDir(p.node, map[string][]byte{server.ServerCertFile: cert, server.ServerKeyFile: key}))
}

// clientTLS returns a client configuration that trusts the cluster CA and
// presents a certificate with common name cn, issued by issuer (nil: no
// client certificate).
func (p *testPKI) clientTLS(t *testing.T, issuer *pki.CA, cn string) *tls.Config {
	t.Helper()
	return p.clientTLSWith(t, issuer, pki.Leaf{CommonName: cn, Client: true})
}

// clientTLSWith is clientTLS of the leaf l.
func (p *testPKI) clientTLSWith(t *testing.T, issuer *pki.CA, l pki.Leaf) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if issuer != nil {
		certPEM, keyPEM, err := issuer.Issue(l)
		require.NoError(t, err)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		require.NoError(t, err)
		// Present it whatever CAs the server asks for: Go's client would
		// otherwise keep a certificate of another CA to itself, and the
		// server's own check would go untested.
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return tc
}

func writeDir(dir string, files map[string][]byte) error {
	for name, data := range files {
		if err := pki.WriteFileAtomic(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startServer serves node on a loopback port and returns its endpoint.
func startServer(t *testing.T, p *testPKI, node server.Node) string {
	t.Helper()
	srv, err := server.New(server.Config{PKIDir: p.node, Node: node, Log: t.Logf})
	require.NoError(t, err)
	return serveOn(t, srv)
}

// serveOn serves srv on a loopback port until the test ends and returns
// its endpoint.
func serveOn(t *testing.T, srv *server.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return "https://" + l.Addr().String()
}

// httpClient returns a client that makes a new connection per request.
func httpClient(tc *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
}

// apiError returns the *nodeapi.Error that err wraps.
func apiError(t *testing.T, err error) *nodeapi.Error {
	t.Helper()
	var ae *nodeapi.Error
	require.True(t, errors.As(err, &ae), "error %v does not wrap a *nodeapi.Error", err)
	return ae
}
