package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

// presentScope reads the scope of the node CA that the node API at
// endpoint presents in its server chain; found is false when it presents
// none (a seed made before node CAs: its leaves come from the root).
func presentScope(ctx context.Context, endpoint string, tc *tls.Config) (sc pki.NodeScope, found bool, err error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return sc, false, err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: tc}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return sc, false, fmt.Errorf("read the node CA of %s: %w", endpoint, err)
	}
	defer conn.Close()
	sc, found = scopeOf(conn.(*tls.Conn).ConnectionState().PeerCertificates)
	return sc, found, nil
}

// scopeOf is the scope of the node CA in a node's server chain: the
// second certificate, when it is a CA that is not a root.
func scopeOf(chain []*x509.Certificate) (sc pki.NodeScope, found bool) {
	if len(chain) < 2 {
		return sc, false
	}
	ca := chain[1]
	if !ca.IsCA || bytes.Equal(ca.RawIssuer, ca.RawSubject) {
		return sc, false
	}
	for _, d := range ca.PermittedDNSDomains {
		if d != "localhost" {
			sc.Domains = append(sc.Domains, d)
		}
	}
	// IssueNodeCA adds loopback to ranges it is given: not given back,
	// unless they are all there is (never wider than the old scope).
	for _, n := range ca.PermittedIPRanges {
		if !n.IP.IsLoopback() {
			sc.Networks = append(sc.Networks, n)
		}
	}
	if len(sc.Networks) == 0 {
		sc.Networks = ca.PermittedIPRanges
	}
	return sc, true
}

// rotationJSON is rotate-ca --status -o json.
type rotationJSON struct {
	// Target is the rotation's goal, null when none is recorded.
	Target *rollout.RotationTarget `json:"target"`
	// Running is set while the target has no done time.
	Running bool `json:"running"`
	// Nodes are the nodes' records of that rotation, in name order.
	Nodes []rollout.RotationRecord `json:"nodes"`
}

func rotationStatusJSON(s rollout.RotationStatus) rotationJSON {
	r := rotationJSON{Running: s.Running, Nodes: s.Nodes}
	if s.Target.ID != "" {
		t := s.Target
		r.Target = &t
	}
	if r.Nodes == nil {
		r.Nodes = []rollout.RotationRecord{}
	}
	return r
}

// printRotationStatus prints the target and one row per node record.
func printRotationStatus(out io.Writer, s rollout.RotationStatus) {
	t := s.Target
	if t.ID == "" {
		fmt.Fprintln(out, "target: none")
	} else {
		state := "not done"
		if !s.Running {
			state = "done " + t.Done.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "target: CA rotation %s to %q (started %s by %s; %s)\n", t.ID, t.New, t.Started.UTC().Format(time.RFC3339), t.By, state)
	}
	if len(s.Nodes) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tPHASE\tSTATE\tUPDATED\tERROR")
	for _, r := range s.Nodes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Phase, r.State, r.Updated.UTC().Format(time.RFC3339), orDefault(r.Error, "-"))
	}
	w.Flush()
}
