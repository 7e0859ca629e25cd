package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

// rotationPKI is a PKI directory with a next CA, as pki init and pki
// rotate-ca leave it.
func rotationPKI(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	require.NoError(t, prepareRotation(dir, false, time.Now(), &bytes.Buffer{}))
	return dir
}

func TestRotateCAFlagErrors(t *testing.T) {
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	next := rotationPKI(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no nodes", []string{"rotate-ca"}, "at least one of the flags in the group [endpoints dir] is required", exitUsage},
		{"status and abort", []string{"rotate-ca", "--status", "--abort", "--dir", "d"}, "if any flags in the group [status abort] are set none of the others can be", exitUsage},
		{"endpoints and dir", []string{"rotate-ca", "--endpoints", "a", "--dir", "d"}, "if any flags in the group [endpoints dir] are set none of the others can be", exitUsage},
		{"bad output", []string{"rotate-ca", "--status", "--endpoints", "a", "--pki", pkiDir, "-o", "xml"}, `-o "xml": want one of table, json, yaml`, exitUsage},
		{"bad network", []string{"rotate-ca", "--endpoints", "a", "--pki", next, "--node-network", "10.0.0.1"}, `--node-network "10.0.0.1"`, exitUsage},
		{"no pki", []string{"rotate-ca", "--endpoints", "a"}, "--pki is required with --endpoints", exitError},
		{"bad endpoint", []string{"rotate-ca", "--endpoints", "http://a", "--pki", next}, `node API endpoint "http://a": scheme "http", want https`, exitError},
		{"no next CA", []string{"rotate-ca", "--endpoints", "a", "--pki", pkiDir}, "make it first with etcdbox pki rotate-ca --dir " + pkiDir, exitError},
		{"no cluster", []string{"rotate-ca", "--status", "--dir", t.TempDir()}, "no cluster", exitError},
		{"cluster rotate-ca needs dir", []string{"cluster", "rotate-ca"}, `required flag(s) "dir" not set`, exitUsage},
		{"no such pki", []string{"rotate-ca", "--abort", "--endpoints", "a", "--pki", t.TempDir()}, "load admin certificate", exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(t.Context(), tc.args, &out, &out)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, tc.code, exitCode(err))
		})
	}
}

// TestRotateCAUnreachable: against nodes that do not answer, each mode
// fails saying what it could not reach: etcd first, which every mode
// needs.
func TestRotateCAUnreachable(t *testing.T) {
	dir := rotationPKI(t)
	api, etcd := "https://127.0.0.1:"+strconv.Itoa(downPort(t)), "https://127.0.0.1:"+strconv.Itoa(downPort(t))
	base := []string{"rotate-ca", "--endpoints", api, "--etcd-endpoints", etcd, "--pki", dir}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"rotate", nil, "no etcd endpoint answers: " + etcd + ": dial tcp"},
		{"status", []string{"--status"}, "no etcd endpoint answers: " + etcd + ": dial tcp"},
		{"abort", []string{"--abort"}, "no etcd endpoint answers: " + etcd + ": dial tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			var out bytes.Buffer
			err := run(ctx, append(append([]string(nil), base...), tc.args...), &out, &out)
			require.Error(t, err)
			t.Log(err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, exitError, exitCode(err))
		})
	}
	// Nothing was promoted.
	assert.DirExists(t, filepath.Join(dir, "next"))
	assert.NoDirExists(t, filepath.Join(dir, "previous"))
}

func TestPromoteCA(t *testing.T) {
	dir := rotationPKI(t)
	next, prev := filepath.Join(dir, "next"), filepath.Join(dir, "previous")
	before := map[string][]byte{}
	for _, f := range pki.InitFiles {
		before[f] = readFile(t, filepath.Join(dir, f))
		before["next/"+f] = readFile(t, filepath.Join(next, f))
	}
	bundle := readFile(t, filepath.Join(dir, "ca-bundle.crt"))

	require.NoError(t, pki.PromoteNext(dir))
	for _, f := range pki.InitFiles {
		assert.Equal(t, before[f], readFile(t, filepath.Join(prev, f)), "previous/%s is the old %s", f, f)
		assert.Equal(t, before["next/"+f], readFile(t, filepath.Join(dir, f)), "%s is the next CA's", f)
	}
	assert.NoDirExists(t, next)
	assert.Equal(t, bundle, readFile(t, filepath.Join(dir, "ca-bundle.crt")), "the bundle stays")
	st, err := os.Stat(prev)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	for _, f := range []string{filepath.Join(dir, pki.CAKeyFile), filepath.Join(prev, pki.AdminKeyFile)} {
		st, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
	_, err = pki.LoadCAFiles(dir)
	assert.NoError(t, err)

	// Nothing to promote now.
	require.NoError(t, os.RemoveAll(prev))
	assert.ErrorContains(t, pki.PromoteNext(dir), filepath.Join(next, pki.CACertFile))
}

// TestPromoteCAResumes: a promotion cut short is finished by the next.
func TestPromoteCAResumes(t *testing.T) {
	dir := rotationPKI(t)
	next, prev := filepath.Join(dir, "next"), filepath.Join(dir, "previous")
	nextCert := readFile(t, filepath.Join(next, pki.CACertFile))
	oldAdmin := readFile(t, filepath.Join(dir, pki.AdminCertFile))
	require.NoError(t, os.Mkdir(prev, 0o700))
	for _, f := range pki.InitFiles[:2] { // ca.crt and ca.key moved already
		require.NoError(t, os.Rename(filepath.Join(dir, f), filepath.Join(prev, f)))
		require.NoError(t, os.Rename(filepath.Join(next, f), filepath.Join(dir, f)))
	}
	require.NoError(t, pki.PromoteNext(dir))
	assert.Equal(t, nextCert, readFile(t, filepath.Join(dir, pki.CACertFile)))
	assert.Equal(t, oldAdmin, readFile(t, filepath.Join(prev, pki.AdminCertFile)))
	assert.NoDirExists(t, next)
}

// nodeChain is a node's server chain: a leaf for 127.0.0.1 under a node
// CA of scope under the root ca.
func nodeChain(t *testing.T, ca *pki.CA, scope pki.NodeScope) (tls.Certificate, *pki.CA) {
	t.Helper()
	nodeCA, err := ca.IssueNodeCA(scope, 0)
	require.NoError(t, err)
	certPEM, keyPEM, err := nodeCA.Issue(pki.Leaf{CommonName: "n1", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(append(certPEM, nodeCA.CertPEM()...), keyPEM)
	require.NoError(t, err)
	return cert, nodeCA
}

func TestScopeOf(t *testing.T) {
	root, err := pki.NewCA("etcdbox-ca", 0)
	require.NoError(t, err)
	_, lan, _ := net.ParseCIDR("10.0.0.0/24")
	scope := pki.NodeScope{Domains: []string{"etcd.example"}, Names: []string{"n1"}, Networks: []*net.IPNet{lan}}
	cert, nodeCA := nodeChain(t, root, scope)
	chain := []*x509.Certificate{cert.Leaf, nodeCA.Cert}

	got, found := scopeOf(chain)
	require.True(t, found)
	assert.Equal(t, []string{"etcd.example", "n1"}, got.Domains, "without localhost")
	require.Len(t, got.Networks, 1, "without loopback")
	assert.Equal(t, "10.0.0.0/24", got.Networks[0].String())
	// Issued again from it, the constraints are the same.
	again, err := root.IssueNodeCA(got, 0)
	require.NoError(t, err)
	assert.Equal(t, nodeCA.Cert.PermittedDNSDomains, again.Cert.PermittedDNSDomains)
	assert.Equal(t, nodeCA.Cert.PermittedIPRanges, again.Cert.PermittedIPRanges)

	// Any address stays any address.
	cert, nodeCA = nodeChain(t, root, pki.NodeScope{Names: []string{"n1"}})
	got, found = scopeOf([]*x509.Certificate{cert.Leaf, nodeCA.Cert})
	require.True(t, found)
	assert.Empty(t, got.Networks)

	// No node CA: a leaf alone, or a leaf and its root.
	_, found = scopeOf(chain[:1])
	assert.False(t, found)
	_, found = scopeOf([]*x509.Certificate{cert.Leaf, root.Cert})
	assert.False(t, found)
}

// TestPresentScope reads the node CA off a node's TLS handshake, with
// the rotation's client configuration.
func TestPresentScope(t *testing.T) {
	dir := rotationPKI(t)
	root, err := pki.LoadCAFiles(dir)
	require.NoError(t, err)
	_, lan, _ := net.ParseCIDR("10.0.0.0/24")
	cert, _ := nodeChain(t, root, pki.NodeScope{Domains: []string{"etcd.example"}, Networks: []*net.IPNet{lan}})
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	tc, err := nodeapi.RotationTLS(dir, filepath.Join(dir, "next"))
	require.NoError(t, err)
	sc, found, err := presentScope(t.Context(), "https://"+l.Addr().String(), tc)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, []string{"etcd.example"}, sc.Domains)
	require.Len(t, sc.Networks, 1)
	assert.Equal(t, "10.0.0.0/24", sc.Networks[0].String())
}

func TestPrintRotationStatus(t *testing.T) {
	var out bytes.Buffer
	printRotationStatus(&out, rollout.RotationStatus{})
	assert.Equal(t, "target: none\n", out.String())
	var js bytes.Buffer
	require.NoError(t, writeJSON(&js, rotationStatusJSON(rollout.RotationStatus{})))
	assert.JSONEq(t, `{"target": null, "running": false, "nodes": []}`, js.String())

	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := rollout.RotationStatus{
		Target:  rollout.RotationTarget{ID: "0123456789abcdef", New: "etcdbox-ca-20260301-120000", Started: started, By: "ops@host"},
		Running: true,
		Nodes: []rollout.RotationRecord{
			{Name: "n1", ID: "0123456789abcdef", Phase: nodeapi.RotationReissue, State: rollout.StateDone, Updated: started.Add(time.Minute)},
			{Name: "n2", ID: "0123456789abcdef", Phase: nodeapi.RotationReissue, State: rollout.StateFailed, Error: "not in effect within 10m0s", Updated: started.Add(2 * time.Minute)},
		},
	}
	out.Reset()
	printRotationStatus(&out, s)
	t.Log("\n" + out.String())
	assert.Contains(t, out.String(), `target: CA rotation 0123456789abcdef to "etcdbox-ca-20260301-120000" (started 2026-03-01T12:00:00Z by ops@host; not done)`+"\n")
	assert.Regexp(t, `NODE +PHASE +STATE +UPDATED +ERROR\n`, out.String())
	assert.Regexp(t, `n2 +reissue +failed +2026-03-01T12:02:00Z +not in effect within 10m0s\n`, out.String())

	// TestGolden pins rotationStatusJSON of this status.

	s.Running, s.Target.Done = false, started.Add(time.Hour)
	out.Reset()
	printRotationStatus(&out, s)
	assert.Contains(t, out.String(), "; done 2026-03-01T13:00:00Z)\n")
}
