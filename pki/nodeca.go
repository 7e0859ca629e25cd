package pki

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The identities of a cluster (DESIGN §6). The operator's root CA signs
// admin certificates, directly, and one node CA per cluster (or per
// rotation). The node CA is what the seed carries: each node signs its own
// server and peer leaves with it. Its name constraints keep it to the
// cluster's names and addresses, and allow no URI SAN but one no leaf
// carries, so that no leaf under it can carry AdminURI; IsAdmin asks for
// both the root as direct issuer and that attribute.
const (
	// AdminURI is the URI SAN that marks an admin certificate.
	AdminURI = "etcdbox://admin"
	// NodeCACommonName is the common name of a node CA.
	NodeCACommonName = "etcdbox-node-ca"
	// PeerCommonName is the common name of every peer leaf: etcd's
	// --peer-cert-allowed-cn lets no other certificate on a peer port.
	PeerCommonName = "etcdbox-peer"
	// nodeURIHost is the one URI host a node CA permits. No leaf carries
	// it; it is there so that the constraint is present.
	nodeURIHost = "node.etcdbox.invalid"
	// DefaultNodeCAValidity is a node CA's lifetime: shorter than its
	// root's, and cut to it.
	DefaultNodeCAValidity = 5 * 365 * 24 * time.Hour
)

// NodeScope is what a node CA may sign for: its name constraints.
type NodeScope struct {
	// Domains are DNS domains the nodes' names live in (the SRV domain):
	// the domain and every name below it.
	Domains []string
	// Names are single DNS names: node names used bare, static peers'
	// host names. localhost is always allowed.
	Names []string
	// Networks are the nodes' address ranges. Empty allows any address;
	// loopback is always allowed.
	Networks []*net.IPNet
}

// IssueNodeCA makes a node CA under the root ca, constrained to scope,
// with a fresh P-256 key. A zero validity means DefaultNodeCAValidity.
func (ca *CA) IssueNodeCA(scope NodeScope, validity time.Duration) (*CA, error) {
	if !ca.IsRoot() {
		return nil, errors.New("issue node CA: the issuer is not a root CA")
	}
	if ca.Cert.MaxPathLenZero || ca.Cert.MaxPathLen == 0 {
		return nil, fmt.Errorf("issue node CA: CA %q may sign leaves only (made before node CAs); make a new CA (etcdbox pki rotate-ca)", ca.Cert.Subject.CommonName)
	}
	if validity <= 0 {
		validity = DefaultNodeCAValidity
	}
	key, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("issue node CA: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, fmt.Errorf("issue node CA: %w", err)
	}
	t := now()
	notAfter := t.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	dns := []string{"localhost"}
	for _, d := range append(append([]string(nil), scope.Domains...), scope.Names...) {
		d = strings.ToLower(strings.Trim(d, "."))
		if d != "" && net.ParseIP(d) == nil && !slices.Contains(dns, d) {
			dns = append(dns, d)
		}
	}
	var nets []*net.IPNet
	if len(scope.Networks) > 0 {
		nets = append(nets, &net.IPNet{IP: net.IPv4(127, 0, 0, 0).To4(), Mask: net.CIDRMask(8, 32)},
			&net.IPNet{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)})
		nets = append(nets, scope.Networks...)
	}
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: NodeCACommonName},
		NotBefore:                   t.Add(-ClockSkew),
		NotAfter:                    notAfter,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:                 []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLen:                  0,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         dns,
		PermittedIPRanges:           nets,
		PermittedURIDomains:         []string{nodeURIHost},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("issue node CA: create certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("issue node CA: parse certificate: %w", err)
	}
	return &CA{Cert: cert, certPEM: encodeCert(der), key: key}, nil
}

// Permitted returns the DNS names and addresses ca's name constraints
// allow, in order; a CA without constraints allows all.
func (ca *CA) Permitted(dns []string, ips []net.IP) ([]string, []net.IP) {
	c := ca.Cert
	var outDNS []string
	for _, d := range dns {
		if len(c.PermittedDNSDomains) == 0 || slices.ContainsFunc(c.PermittedDNSDomains, func(p string) bool { return dnsWithin(d, p) }) {
			outDNS = append(outDNS, d)
		}
	}
	var outIPs []net.IP
	for _, ip := range ips {
		if len(c.PermittedIPRanges) == 0 || slices.ContainsFunc(c.PermittedIPRanges, func(n *net.IPNet) bool { return n.Contains(ip) }) {
			outIPs = append(outIPs, ip)
		}
	}
	return outDNS, outIPs
}

// dnsWithin is RFC 5280's DNS name constraint: name is the constraint or
// below it; a constraint with a leading dot allows only names below it.
func dnsWithin(name, constraint string) bool {
	name, constraint = strings.ToLower(name), strings.ToLower(constraint)
	if strings.HasPrefix(constraint, ".") {
		return strings.HasSuffix(name, constraint)
	}
	return name == constraint || strings.HasSuffix(name, "."+constraint)
}

// IssueAdmin makes an admin client certificate signed by the root ca:
// common name name (the operator's, for logs), the AdminURI SAN, client
// use only. A zero validity means AdminValidity.
func (ca *CA) IssueAdmin(name string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if !ca.IsRoot() {
		return nil, nil, errors.New("issue admin certificate: only the root CA issues admin certificates")
	}
	if validity == 0 {
		validity = AdminValidity
	}
	u, err := url.Parse(AdminURI)
	if err != nil {
		return nil, nil, err
	}
	return ca.Issue(Leaf{CommonName: name, Client: true, Validity: validity, URIs: []*url.URL{u}})
}

// IsAdmin reports whether a verified client chain is an admin's: a leaf
// issued directly by a trusted root (not by a node CA), that carries
// AdminURI, or, from admin certificates made before it existed, the
// common name AdminCommonName. A node holding a node CA can make
// neither: its leaves hang below the node CA, and the node CA's name
// constraints refuse the URI.
func IsAdmin(chains [][]*x509.Certificate) bool {
	for _, chain := range chains {
		if len(chain) != 2 || !chain[1].IsCA {
			continue
		}
		leaf := chain[0]
		if leaf.IsCA {
			continue
		}
		if leaf.Subject.CommonName == AdminCommonName {
			return true
		}
		for _, u := range leaf.URIs {
			if u.String() == AdminURI {
				return true
			}
		}
	}
	return false
}

// Identity names a verified client chain for logs and refusals: "admin
// NAME", "node NAME" (below a node CA) or "NAME" (a leaf of a root CA
// whose seed carries its key: a node, or anyone who holds that key).
func Identity(chains [][]*x509.Certificate) string {
	if len(chains) == 0 || len(chains[0]) == 0 {
		return "an unverified client"
	}
	cn := chains[0][0].Subject.CommonName
	switch {
	case IsAdmin(chains):
		return "admin " + cn
	case len(chains[0]) > 2:
		return "node " + cn
	}
	return cn
}
