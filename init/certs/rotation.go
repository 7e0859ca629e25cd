package certs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// Record is a node's CA rotation as it keeps it on DATA, keys included.
type Record struct {
	nodeapi.CARotation
	// SeedCA is the root the seed named when the node first rotated: the
	// record applies while the seed names it, OldCA or NewCA.
	SeedCA string `json:"seedCA"`
	OldCA  string `json:"oldCA"`
	NewCA  string `json:"newCA"`
	// NodeCACert and NodeCAKey are the node CA the record issues with:
	// the new one from RotationReissue on; before that, the one an
	// earlier rotation brought, or none (the seed's).
	NodeCACert string `json:"nodeCACert,omitempty"`
	NodeCAKey  string `json:"nodeCAKey,omitempty"`
}

// ErrPhase wraps a request that cannot follow the node's rotation.
var ErrPhase = errors.New("CA rotation refused")

// Load reads the record at path; a missing file is the zero record.
func Load(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, nil
	}
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Save writes the record atomically and durably, owner-only: it holds
// the node CA's key.
func Save(path string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return pki.WriteFileAtomic(path, append(b, '\n'), 0o600)
}

// Fingerprint is a rotation's ID: the first 16 hex digits of the SHA-256
// of the new root's DER.
func Fingerprint(certPEM []byte) (string, error) {
	c, err := pki.ParseCertPEM(certPEM)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])[:16], nil
}

// Next checks req against the node's record rec, its seed's root seedCA
// and its plan p (Decide), and
// returns the record once req's phase is in effect, and whether that
// changes anything. A phase the node has passed already is a no-op; a
// phase that skips one is refused, as is a new rotation while another is
// under way.
func Next(rec Record, seedCA string, p Plan, req nodeapi.CARotationRequest, now time.Time) (Record, bool, error) {
	want := nodeapi.PhaseIndex(req.Phase)
	if want < 0 {
		return rec, false, fmt.Errorf("%w: unknown phase %q (want %v)", ErrPhase, req.Phase, nodeapi.RotationPhases)
	}
	newCA, err := pki.ParseCertPEM([]byte(req.NewCA))
	if err != nil {
		return rec, false, fmt.Errorf("%w: newCA: %w", ErrPhase, err)
	}
	if !newCA.IsCA || newCA.CheckSignatureFrom(newCA) != nil {
		return rec, false, fmt.Errorf("%w: newCA %q is not a self-signed CA", ErrPhase, newCA.Subject.CommonName)
	}
	id, err := Fingerprint([]byte(req.NewCA))
	if err != nil {
		return rec, false, err
	}
	have := nodeapi.PhaseIndex(rec.Phase)
	switch {
	case rec.ID == id && want <= have:
		return rec, false, nil // passed already
	case rec.ID == id && want > have+1:
		return rec, false, fmt.Errorf("%w: phase %s of rotation %s needs phase %s first (the node is at %s)", ErrPhase, req.Phase, id, nodeapi.RotationPhases[have+1], rec.Phase)
	case rec.ID != id && rec.ID != "" && rec.Phase != nodeapi.RotationDrop:
		return rec, false, fmt.Errorf("%w: rotation %s (to %s) is at phase %s on this node; finish it before another", ErrPhase, rec.ID, rec.New, rec.Phase)
	case rec.ID != id && want != 0:
		return rec, false, fmt.Errorf("%w: rotation %s starts with phase %s, not %s", ErrPhase, id, nodeapi.RotationTrust, req.Phase)
	}
	if rec.ID != id {
		old, err := pki.ParseCertPEM(p.Sole)
		if err != nil {
			return rec, false, fmt.Errorf("%w: the node's own root: %w", ErrPhase, err)
		}
		if sameCert(p.Sole, []byte(req.NewCA)) {
			return rec, false, fmt.Errorf("%w: the node trusts %q already, alone", ErrPhase, newCA.Subject.CommonName)
		}
		// A second rotation keeps issuing with the first one's node CA
		// until its own RotationReissue.
		first := rec.SeedCA
		if first == "" {
			first = seedCA
		}
		rec = Record{SeedCA: first, OldCA: string(p.Sole), NewCA: req.NewCA, NodeCACert: rec.NodeCACert, NodeCAKey: rec.NodeCAKey}
		rec.ID, rec.Old, rec.New = id, old.Subject.CommonName, newCA.Subject.CommonName
	}
	if req.Phase == nodeapi.RotationReissue {
		nodeCA, err := pki.LoadCA([]byte(req.NodeCACert), []byte(req.NodeCAKey))
		if err != nil {
			return rec, false, fmt.Errorf("%w: node CA: %w", ErrPhase, err)
		}
		if err := nodeCA.Cert.CheckSignatureFrom(newCA); err != nil {
			return rec, false, fmt.Errorf("%w: the node CA is not signed by the new root: %w", ErrPhase, err)
		}
		rec.NodeCACert, rec.NodeCAKey = req.NodeCACert, req.NodeCAKey
	}
	rec.Phase, rec.Updated = req.Phase, now
	return rec, true, nil
}

// RenewAt is when a leaf is due: two thirds into its life, counted from
// its issue (NotBefore is backdated by pki.ClockSkew).
func RenewAt(certPEM []byte) (time.Time, error) {
	c, err := pki.ParseCertPEM(certPEM)
	if err != nil {
		return time.Time{}, err
	}
	issued := c.NotBefore.Add(pki.ClockSkew)
	return issued.Add(c.NotAfter.Sub(issued) * 2 / 3), nil
}
