// Package certs decides a node's certificates (DESIGN §6): which roots it
// trusts and which CA issues its leaves, from the seed and the CA
// rotation the node keeps on DATA (Decide); whether a rotation phase may
// follow the one in effect (Next); and when a leaf is due for renewal
// (RenewAt). The init writes the files and restarts etcd; this package
// only decides, so that every rule is tested without a node.
package certs

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

// Plan is what a node trusts and what issues its leaves.
type Plan struct {
	// Roots is ca.crt: the roots the node trusts, PEM.
	Roots []byte
	// Issuer issues the node's leaves; nil when the seed gives fixed
	// ones (FixedCert, FixedKey).
	Issuer              *pki.CA
	FixedCert, FixedKey []byte
	Kind                string // nodeapi.IssuerNodeCA, IssuerRootKey or IssuerFixed
	Warnings            []string
	// Sole is the root the node trusts once no rotation is under way:
	// the old root of the next rotation.
	Sole []byte
}

// NodeCA reports whether leaves come from a node CA: then peer ports
// take peer leaves only (pki.PeerCommonName).
func (p Plan) NodeCA() bool { return p.Kind == nodeapi.IssuerNodeCA }

// warnRootKey is status's warning for a seed that carries the root's key.
const warnRootKey = "the seed carries the root CA's key (pki.caKey): any node can mint an admin certificate; move to a node CA with etcdbox pki rotate-ca and etcdbox rotate-ca"

// Decide plans from the seed's pki section and the node's rotation record
// (zero when it has none). A record applies while the seed names its old
// or new root; a seed that names another root wins, with a warning.
func Decide(k seed.PKI, rec Record) (Plan, error) {
	p, err := fromSeed(k)
	if err != nil || rec.ID == "" {
		return p, err
	}
	seedCA := []byte(k.CACert)
	switch {
	case sameCert(seedCA, []byte(rec.NewCA)) && p.NodeCA():
		// The operator made new seeds with the new root: they win.
		if rec.Phase != nodeapi.RotationDrop {
			p.Roots = bundle(rec.OldCA, rec.NewCA)
		}
		return p, nil
	case !sameCert(seedCA, []byte(rec.SeedCA)) && !sameCert(seedCA, []byte(rec.OldCA)) && !sameCert(seedCA, []byte(rec.NewCA)):
		p.Warnings = append(p.Warnings, fmt.Sprintf("the CA rotation %s kept on DATA is from another root than the seed's; the seed's is used", rec.ID))
		return p, nil
	}
	if rec.NodeCACert != "" {
		nodeCA, err := pki.LoadCA([]byte(rec.NodeCACert), []byte(rec.NodeCAKey))
		if err != nil {
			return p, fmt.Errorf("CA rotation %s: node CA: %w", rec.ID, err)
		}
		p.Issuer, p.Kind = nodeCA, nodeapi.IssuerNodeCA
		p.Warnings = slicesDelete(p.Warnings, warnRootKey)
	}
	p.Roots, p.Sole = bundle(rec.OldCA, rec.NewCA), []byte(rec.OldCA)
	if rec.Phase == nodeapi.RotationDrop {
		p.Roots, p.Sole = []byte(rec.NewCA), []byte(rec.NewCA)
		if !sameCert(seedCA, []byte(rec.NewCA)) {
			p.Warnings = append(p.Warnings, "the seed names a CA rotated away from; the node uses its rotation record on DATA: make new seeds (etcdbox seed --pki) for new and wiped nodes")
		}
	}
	return p, nil
}

// fromSeed plans from the seed alone.
func fromSeed(k seed.PKI) (Plan, error) {
	p := Plan{Roots: []byte(k.CACert), Sole: []byte(k.CACert)}
	switch {
	case k.NodeCACert != "":
		ca, err := pki.LoadCA([]byte(k.NodeCACert), []byte(k.NodeCAKey))
		if err != nil {
			return p, fmt.Errorf("seed pki.nodeCACert: %w", err)
		}
		p.Issuer, p.Kind = ca, nodeapi.IssuerNodeCA
	case k.CAKey != "":
		ca, err := pki.LoadCA([]byte(k.CACert), []byte(k.CAKey))
		if err != nil {
			return p, fmt.Errorf("seed pki: %w", err)
		}
		p.Issuer, p.Kind = ca, nodeapi.IssuerRootKey
		p.Warnings = append(p.Warnings, warnRootKey)
	case k.Cert != "":
		p.FixedCert, p.FixedKey, p.Kind = []byte(k.Cert), []byte(k.Key), nodeapi.IssuerFixed
	default:
		return p, errors.New("seed pki: no CA key and no certificate")
	}
	return p, nil
}

// bundle joins PEM texts, each on lines of its own: a seed's PEM need not
// end in a newline, and a PEM block glued to the next one's BEGIN line
// does not parse.
func bundle(pems ...string) []byte {
	var b []byte
	for _, p := range pems {
		b = append(b, strings.TrimSpace(p)...)
		b = append(b, '\n')
	}
	return b
}

// sameCert reports whether two PEM texts hold the same first certificate.
func sameCert(a, b []byte) bool {
	ca, err := pki.ParseCertPEM(a)
	if err != nil {
		return false
	}
	cb, err := pki.ParseCertPEM(b)
	return err == nil && bytes.Equal(ca.Raw, cb.Raw)
}

func slicesDelete(s []string, v string) []string {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}
