package certs

import (
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

type rootCA struct {
	ca      *pki.CA
	nodeCA  *pki.CA
	nodeKey string
}

func newRoot(t *testing.T, name string) rootCA {
	t.Helper()
	ca, err := pki.NewCA(name, 0)
	require.NoError(t, err)
	nodeCA, err := ca.IssueNodeCA(pki.NodeScope{}, 0)
	require.NoError(t, err)
	key, err := nodeCA.KeyPEM()
	require.NoError(t, err)
	return rootCA{ca: ca, nodeCA: nodeCA, nodeKey: string(key)}
}

func (r rootCA) seedPKI() seed.PKI {
	return seed.PKI{CACert: string(r.ca.CertPEM()), NodeCACert: string(r.nodeCA.CertPEM()), NodeCAKey: r.nodeKey}
}

func (r rootCA) req(phase string) nodeapi.CARotationRequest {
	q := nodeapi.CARotationRequest{Phase: phase, NewCA: string(r.ca.CertPEM())}
	if phase == nodeapi.RotationReissue {
		q.NodeCACert, q.NodeCAKey = string(r.nodeCA.CertPEM()), r.nodeKey
	}
	return q
}

// roots counts the certificates of a plan's ca.crt.
func roots(p Plan) int { return strings.Count(string(p.Roots), "BEGIN CERTIFICATE") }

// TestRotationPhases walks a node through a rotation, then a second one,
// checking what it trusts and what issues its leaves at each phase, that
// a phase passed is a no-op, and that a skipped phase is refused.
func TestRotationPhases(t *testing.T) {
	old, next, third := newRoot(t, "old"), newRoot(t, "next"), newRoot(t, "third")
	sp := old.seedPKI()
	now := time.Unix(1000, 0)
	step := func(rec Record, req nodeapi.CARotationRequest) (Record, Plan, bool, error) {
		p, err := Decide(sp, rec)
		require.NoError(t, err)
		rec2, changed, err := Next(rec, sp.CACert, p, req, now)
		if err != nil {
			return rec, p, changed, err
		}
		p2, err := Decide(sp, rec2)
		require.NoError(t, err)
		return rec2, p2, changed, nil
	}

	p, err := Decide(sp, Record{})
	require.NoError(t, err)
	assert.Equal(t, 1, roots(p))
	assert.True(t, p.NodeCA())
	assert.Empty(t, p.Warnings)

	_, _, _, err = step(Record{}, next.req(nodeapi.RotationReissue))
	require.ErrorIs(t, err, ErrPhase)
	assert.ErrorContains(t, err, "starts with phase trust")

	rec, p, changed, err := step(Record{}, next.req(nodeapi.RotationTrust))
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, 2, roots(p), "old and new trusted")
	assert.Equal(t, old.nodeCA.Cert.Raw, p.Issuer.Cert.Raw, "leaves still from the old node CA")
	assert.Equal(t, "old", rec.Old)
	assert.Equal(t, "next", rec.New)

	_, _, _, err = step(rec, next.req(nodeapi.RotationDrop))
	assert.ErrorContains(t, err, "needs phase reissue first")
	_, _, _, err = step(rec, third.req(nodeapi.RotationTrust))
	assert.ErrorContains(t, err, "finish it before another")

	again, _, changed, err := step(rec, next.req(nodeapi.RotationTrust))
	require.NoError(t, err)
	assert.False(t, changed, "a phase passed is a no-op")
	assert.Equal(t, rec, again)

	bad := next.req(nodeapi.RotationReissue)
	bad.NodeCACert, bad.NodeCAKey = string(third.nodeCA.CertPEM()), third.nodeKey
	_, _, _, err = step(rec, bad)
	assert.ErrorContains(t, err, "not signed by the new root")

	rec, p, _, err = step(rec, next.req(nodeapi.RotationReissue))
	require.NoError(t, err)
	assert.Equal(t, 2, roots(p))
	assert.Equal(t, next.nodeCA.Cert.Raw, p.Issuer.Cert.Raw, "leaves from the new node CA")

	rec, p, _, err = step(rec, next.req(nodeapi.RotationDrop))
	require.NoError(t, err)
	assert.Equal(t, 1, roots(p))
	assert.True(t, sameCert(p.Roots, next.ca.CertPEM()), "the new root alone")
	assert.Contains(t, strings.Join(p.Warnings, "; "), "make new seeds")

	// A second rotation starts from the first's new root, and issues
	// with its node CA until its own reissue.
	rec, p, _, err = step(rec, third.req(nodeapi.RotationTrust))
	require.NoError(t, err)
	assert.Equal(t, "next", rec.Old)
	assert.Equal(t, 2, roots(p))
	assert.True(t, sameCert(p.Roots, next.ca.CertPEM()))
	assert.Equal(t, next.nodeCA.Cert.Raw, p.Issuer.Cert.Raw)
	assert.True(t, sameCert([]byte(rec.SeedCA), old.ca.CertPEM()), "the seed's root is remembered")

	// The record survives on DATA.
	path := filepath.Join(t.TempDir(), "ca-rotation.json")
	require.NoError(t, Save(path, rec))
	back, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, rec.ID, back.ID)
	assert.Equal(t, rec.NodeCAKey, back.NodeCAKey)
	none, err := Load(filepath.Join(t.TempDir(), "none.json"))
	require.NoError(t, err)
	assert.Zero(t, none.ID)
}

// TestDecideLegacyAndForeign: a seed with the root's key warns; a record
// of other roots than the seed's is ignored, with a warning.
func TestDecideLegacyAndForeign(t *testing.T) {
	old, next := newRoot(t, "old"), newRoot(t, "next")
	key, err := old.ca.KeyPEM()
	require.NoError(t, err)
	legacy := seed.PKI{CACert: string(old.ca.CertPEM()), CAKey: string(key)}
	p, err := Decide(legacy, Record{})
	require.NoError(t, err)
	assert.Equal(t, nodeapi.IssuerRootKey, p.Kind)
	assert.Contains(t, strings.Join(p.Warnings, "; "), "any node can mint an admin certificate")

	// The legacy node, reissued from a node CA, warns no more.
	rec, _, err := Next(Record{}, legacy.CACert, p, next.req(nodeapi.RotationTrust), time.Now())
	require.NoError(t, err)
	p, err = Decide(legacy, rec)
	require.NoError(t, err)
	rec, _, err = Next(rec, legacy.CACert, p, next.req(nodeapi.RotationReissue), time.Now())
	require.NoError(t, err)
	p, err = Decide(legacy, rec)
	require.NoError(t, err)
	assert.Equal(t, nodeapi.IssuerNodeCA, p.Kind)
	assert.NotContains(t, strings.Join(p.Warnings, "; "), "any node can mint")

	other := newRoot(t, "other")
	p, err = Decide(other.seedPKI(), rec)
	require.NoError(t, err)
	assert.Contains(t, strings.Join(p.Warnings, "; "), "from another root than the seed's")
	assert.Equal(t, other.nodeCA.Cert.Raw, p.Issuer.Cert.Raw)
}

func TestRenewAt(t *testing.T) {
	ca, err := pki.NewCA("r", 0)
	require.NoError(t, err)
	before := time.Now()
	certPEM, _, err := ca.Issue(pki.Leaf{CommonName: "n1", DNSNames: []string{"n1"}, Server: true, Validity: 90 * time.Second})
	require.NoError(t, err)
	at, err := RenewAt(certPEM)
	require.NoError(t, err)
	assert.WithinDuration(t, before.Add(60*time.Second), at, 2*time.Second, "two thirds of 90s")
}

// TestBundleOfPEMsWithoutNewlines: a seed's PEM may lack its last
// newline; the roots of a rotation still parse, both of them.
func TestBundleOfPEMsWithoutNewlines(t *testing.T) {
	old, next := newRoot(t, "old"), newRoot(t, "next")
	sp := old.seedPKI()
	sp.CACert = strings.TrimSpace(sp.CACert)
	req := next.req(nodeapi.RotationTrust)
	req.NewCA = strings.TrimSpace(req.NewCA)
	p, err := Decide(sp, Record{})
	require.NoError(t, err)
	rec, _, err := Next(Record{}, sp.CACert, p, req, time.Now())
	require.NoError(t, err)
	p, err = Decide(sp, rec)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(p.Roots))
	assert.Len(t, pool.Subjects(), 2, "both roots parse") //nolint:staticcheck // Subjects lists what the pool holds
}
