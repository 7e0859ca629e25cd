package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/etcdbox/etcdbox/init/certs"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/pki"
)

// The node's certificates (DESIGN §6): issued at boot, renewed while the
// node runs, and rotated to a new CA one phase at a time. What to trust
// and what to issue with is init/certs' decision (certs.Decide); this
// file writes the files and restarts etcd where a phase needs it.

// rotationFile is the node's CA rotation record (certs.Record).
func (n *node) rotationFile() string { return filepath.Join(n.stateDir(), "ca-rotation.json") }

// certPlan decides from the seed and the rotation record.
func (n *node) certPlan() (certs.Plan, certs.Record, error) {
	rec, err := certs.Load(n.rotationFile())
	if err != nil {
		return certs.Plan{}, rec, fmt.Errorf("CA rotation record: %w", err)
	}
	p, err := certs.Decide(n.seed.PKI, rec)
	return p, rec, err
}

// issueCertificates writes ca.crt, server.{crt,key} and peer.{crt,key}
// into state/pki, with fresh keys: issued from the node CA (or the root's
// key, in older seeds), or the seed's own certificate and key. The server
// leaf is named after the node, the peer leaf pki.PeerCommonName; both
// cover the node's name, its name in the discovery domain, its addresses
// and localhost, as far as the issuer may sign them.
func (n *node) issueCertificates(context.Context) error {
	n.certMu.Lock()
	defer n.certMu.Unlock()
	p, _, err := n.certPlan()
	if err != nil {
		return err
	}
	for _, w := range p.Warnings {
		n.log.Printf("pki: warning: %s", w)
	}
	n.peerOnly = p.NodeCA()
	return n.writeCerts(p, false)
}

// certKinds are the node's leaves.
var certKinds = []string{"server", "peer"}

// writeCerts writes the plan's roots and leaves; with keep, each leaf
// keeps its key (a renewal, a rotation), so that swapping the
// certificate file is the whole change, atomic for etcd's next
// handshake.
func (n *node) writeCerts(p certs.Plan, keep bool) error {
	dir := n.pkiDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	files := []pki.File{{Name: "ca.crt", Data: p.Roots, Mode: 0o644}}
	for _, kind := range certKinds {
		if p.Issuer == nil {
			files = append(files, pki.File{Name: kind + ".key", Data: p.FixedKey, Mode: 0o600}, pki.File{Name: kind + ".crt", Data: p.FixedCert, Mode: 0o644})
			continue
		}
		cert, key, err := n.issueLeaf(p.Issuer, kind, keep)
		if err != nil {
			return err
		}
		if !keep {
			files = append(files, pki.File{Name: kind + ".key", Data: key, Mode: 0o600})
		}
		files = append(files, pki.File{Name: kind + ".crt", Data: cert, Mode: 0o644})
	}
	// One set: the roots, and each leaf with its key.
	return pki.WriteFilesAtomic(dir, files...)
}

// issueLeaf issues one leaf from ca, with the key on file when keep is
// set.
func (n *node) issueLeaf(ca *pki.CA, kind string, keep bool) (cert, key []byte, err error) {
	l := pki.Leaf{CommonName: n.name, Server: true, Client: true, Validity: n.seed.PKI.LeafLife()}
	if kind == "peer" {
		l.CommonName = pki.PeerCommonName
	}
	l.DNSNames, l.IPs = n.sans()
	if keep {
		b, err := os.ReadFile(filepath.Join(n.pkiDir(), kind+".key"))
		if err != nil {
			return nil, nil, fmt.Errorf("renew %s certificate: %w", kind, err)
		}
		if l.Key, err = pki.ParseKeyPEM(b); err != nil {
			return nil, nil, fmt.Errorf("renew %s certificate: %w", kind, err)
		}
	}
	cert, key, err = ca.Issue(l)
	if err != nil {
		return nil, nil, fmt.Errorf("issue %s certificate: %w", kind, err)
	}
	return cert, key, nil
}

// sans returns the DNS names and addresses a node's leaves carry.
func (n *node) sans() ([]string, []net.IP) {
	var domains []string
	if n.domain != "" {
		domains = append(domains, n.domain)
	}
	return pki.NodeSANs(n.name, domains, n.ips)
}

// renewCertificates renews the node's leaves at two thirds of their life
// (certs.RenewAt), each keeping its key: etcd and the node API read leaf
// files at every handshake, so nothing restarts.
func (n *node) renewCertificates(ctx context.Context) {
	every := min(max(n.seed.PKI.LeafLife()/30, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.renewDue(time.Now()); err != nil {
			n.log.Printf("pki: renew: %v", err)
		}
	}
}

// renewDue renews the leaves when one of them is due.
func (n *node) renewDue(now time.Time) error {
	n.certMu.Lock()
	defer n.certMu.Unlock()
	due := false
	for _, kind := range certKinds {
		b, err := os.ReadFile(filepath.Join(n.pkiDir(), kind+".crt"))
		if err != nil {
			return err
		}
		at, err := certs.RenewAt(b)
		if err != nil {
			return fmt.Errorf("%s.crt: %w", kind, err)
		}
		due = due || !now.Before(at)
	}
	if !due {
		return nil
	}
	p, _, err := n.certPlan()
	if err != nil || p.Issuer == nil {
		return err // fixed leaves are the operator's to renew
	}
	if err := n.writeCerts(p, true); err != nil {
		return err
	}
	n.log.Printf("pki: leaves renewed, valid for %s", n.seed.PKI.LeafLife())
	return nil
}

// rotateCA applies one phase of a CA rotation (certs.Next): it records
// the phase on DATA first, so that a reboot resumes it, writes the roots
// and leaves, and where etcd must read its trusted roots again (trust,
// drop) restarts it and waits until it serves again. A phase passed
// already changes nothing.
func (n *node) rotateCA(ctx context.Context, req nodeapi.CARotationRequest) (nodeapi.CARotation, error) {
	n.certMu.Lock()
	defer n.certMu.Unlock()
	p, rec, err := n.certPlan()
	if err != nil {
		return rec.CARotation, err
	}
	next, changed, err := certs.Next(rec, n.seed.PKI.CACert, p, req, time.Now())
	if errors.Is(err, certs.ErrPhase) {
		return rec.CARotation, fmt.Errorf("%w: %w", server.ErrRefused, err)
	}
	if err != nil || !changed {
		return next.CARotation, err
	}
	if err := certs.Save(n.rotationFile(), next); err != nil {
		return rec.CARotation, err
	}
	if p, err = certs.Decide(n.seed.PKI, next); err != nil {
		return rec.CARotation, err
	}
	if err := n.writeCerts(p, true); err != nil {
		return rec.CARotation, err
	}
	n.log.Printf("pki: CA rotation %s (%s to %s): phase %s in effect", next.ID, next.Old, next.New, next.Phase)
	if slices.Contains([]string{nodeapi.RotationTrust, nodeapi.RotationDrop}, next.Phase) {
		if err := n.restartEtcd(ctx, "its trusted CAs changed"); err != nil {
			return next.CARotation, err
		}
	}
	return next.CARotation, nil
}

// restartEtcd stops etcd gracefully for its supervisor to start it again
// at once, and waits until the new process serves as a voter (the
// health gate's test), for up to two minutes. Without a running etcd
// there is nothing to restart: it reads the files when it starts.
func (n *node) restartEtcd(ctx context.Context, why string) error {
	sup := n.supervisor()
	if sup == nil || sup.Pid() == 0 {
		return nil
	}
	old := sup.Pid()
	n.log.Printf("etcd: restarting: %s", why)
	if err := sup.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("restart etcd: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	problem := "not restarted"
	for {
		if pid := sup.Pid(); pid != 0 && pid != old {
			if problem = n.gateProblem(ctx); problem == "" {
				n.log.Printf("etcd: restarted (pid %d), serving", pid)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd restarted for new trusted CAs does not serve: %s", problem)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// pkiStatus is the node's certificates for status: what issues them,
// their nearest expiry, the rotation and the warnings.
func (n *node) pkiStatus() (nodeapi.PKI, time.Time) {
	var st nodeapi.PKI
	var nearest time.Time
	note := func(t time.Time) {
		if !t.IsZero() && (nearest.IsZero() || t.Before(nearest)) {
			nearest = t
		}
	}
	for _, kind := range certKinds {
		if b, err := os.ReadFile(filepath.Join(n.pkiDir(), kind+".crt")); err == nil {
			exp, _ := pki.Expiry(b)
			note(exp)
			if c, err := pki.ParseCertPEM(b); err == nil && kind == "server" {
				st.Renewed = c.NotBefore.Add(pki.ClockSkew)
			}
		}
	}
	if n.seed == nil {
		return st, nearest
	}
	p, rec, err := n.certPlan()
	if err != nil {
		st.Warnings = append(st.Warnings, err.Error())
		return st, nearest
	}
	st.Issuer, st.Rotation, st.Warnings = p.Kind, rec.CARotation, append(st.Warnings, p.Warnings...)
	if p.Issuer != nil {
		note(p.Issuer.Cert.NotAfter)
	} else {
		st.Renewed = time.Time{}
	}
	return st, nearest
}

// CARotation answers the node API: where this node is in a CA rotation.
func (a *apiNode) CARotation() (nodeapi.CARotation, error) {
	rec, err := certs.Load(a.n.rotationFile())
	return rec.CARotation, err
}

// RotateCA answers the node API: one phase of a CA rotation (rotateCA).
func (a *apiNode) RotateCA(ctx context.Context, req nodeapi.CARotationRequest) (nodeapi.CARotation, error) {
	return a.n.rotateCA(ctx, req)
}
