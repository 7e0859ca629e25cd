package seed

import (
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/pki"
)

// Validate reports every problem of s at once, as a *multierror.Error of
// *FieldError values. Zero values that ApplyDefaults fills in are valid.
func (s *Seed) Validate() error {
	var p problems
	switch {
	case s.Cluster == "":
		p.add("cluster", "required")
	case !ValidName(s.Cluster):
		p.add("cluster", "%q is not a valid cluster name (%s)", s.Cluster, NameRule)
	}
	if s.Name != "" && !ValidName(s.Name) {
		p.add("name", "%q is not a valid node name (%s)", s.Name, NameRule)
	}
	p.discovery(&s.Discovery, s.Etcd.PeerPort)
	p.network(&s.Network)
	p.pki(&s.PKI)
	p.port("etcd.clientPort", s.Etcd.ClientPort)
	p.port("etcd.peerPort", s.Etcd.PeerPort)
	p.port("api.port", s.API.Port)
	p.port("etcd.metricsPort", s.Etcd.MetricsPort)
	p.port("etcd.httpPort", s.Etcd.HTTPPort)
	p.upgrade(&s.Upgrade)
	p.etcd(&s.Etcd)
	p.backup(&s.Backup)
	if r := s.Recovery; r != nil {
		if !ValidName(r.Survivor) {
			p.add("recovery.survivor", "%q: want the surviving node's name (%s)", r.Survivor, NameRule)
		}
		if !recoveryTokenRE.MatchString(r.Token) {
			p.add("recovery.token", "want recover-<cluster ID>-<member ID> in hex, as the survivor's etcdbox status shows it")
		}
	}
	client, peer, api := or(s.Etcd.ClientPort, DefaultClientPort), or(s.Etcd.PeerPort, DefaultPeerPort), or(s.API.Port, DefaultAPIPort)
	if client == peer {
		p.add("etcd", "clientPort and peerPort are both %d", client)
	}
	if api == client || api == peer {
		p.add("api.port", "%d is also an etcd port", api)
	}
	if m := s.Etcd.MetricsPort; m != 0 && (m == client || m == peer || m == api) {
		p.add("etcd.metricsPort", "%d is also the client, peer or node API port", m)
	}
	// The HTTP port may be the client port (etcd's default: both on one
	// listener), never another of the node's ports.
	if h := or(s.Etcd.HTTPPort, DefaultHTTPPort); h == peer || h == api || h == s.Etcd.MetricsPort {
		dflt := ""
		if s.Etcd.HTTPPort == 0 {
			dflt = " (its default)"
		}
		p.add("etcd.httpPort", "%d%s is also the peer, node API or metrics port", h, dflt)
	}
	return p.err()
}

func (p *problems) discovery(d *Discovery, etcdPeerPort int) {
	if d.SRV != "" && len(d.Peers) > 0 {
		p.add("discovery", "srv and peers are exclusive")
	}
	if d.SRV != "" && !ValidDomain(d.SRV) {
		p.add("discovery.srv", "%q is not a valid domain name", d.SRV)
	}
	switch {
	case d.SRVName == "":
	case d.SRV == "":
		p.add("discovery.srvName", "needs discovery.srv")
	case !ValidLabel(d.SRVName):
		p.add("discovery.srvName", "%q is not a valid service name", d.SRVName)
	}
	names := map[string]int{}
	endpoints := map[string]int{}
	for i, peer := range d.Peers {
		at := fmt.Sprintf("discovery.peers[%d]", i)
		switch {
		case peer.Name == "":
			p.add(at+".name", "required")
		case !ValidName(peer.Name):
			p.add(at+".name", "%q is not a valid node name (%s)", peer.Name, NameRule)
		default:
			if j, dup := names[peer.Name]; dup {
				p.add(at+".name", "%q already used by discovery.peers[%d]", peer.Name, j)
			}
			names[peer.Name] = i
		}
		switch {
		case peer.Host == "":
			p.add(at+".host", "required")
		case !validHost(peer.Host):
			p.add(at+".host", "%q is not an IP address or DNS name", peer.Host)
		default:
			ep := net.JoinHostPort(strings.ToLower(peer.Host), strconv.Itoa(or(peer.PeerPort, or(etcdPeerPort, DefaultPeerPort))))
			if j, dup := endpoints[ep]; dup {
				p.add(at, "peer address %s already used by discovery.peers[%d]", ep, j)
			}
			endpoints[ep] = i
		}
		p.port(at+".peerPort", peer.PeerPort)
		p.port(at+".clientPort", peer.ClientPort)
		p.port(at+".apiPort", peer.APIPort)
		if peer.APIPort != 0 && (peer.APIPort == peer.PeerPort || peer.APIPort == peer.ClientPort) {
			p.add(at+".apiPort", "%d is also an etcd port of this peer", peer.APIPort)
		}
		p.port(at+".httpPort", peer.HTTPPort)
		if peer.HTTPPort != 0 && (peer.HTTPPort == peer.PeerPort || peer.HTTPPort == peer.APIPort) {
			p.add(at+".httpPort", "%d is also the peer or node API port of this peer", peer.HTTPPort)
		}
	}
	switch {
	case d.InitialSize < 0:
		p.add("discovery.initialSize", "%d is negative", d.InitialSize)
	case len(d.Peers) > 0 && d.InitialSize > len(d.Peers):
		p.add("discovery.initialSize", "%d exceeds the %d peers listed", d.InitialSize, len(d.Peers))
	}
}

func (p *problems) network(n *Network) {
	names := map[string]int{}
	macs := map[string]int{}
	for i, ifc := range n.Interfaces {
		at := fmt.Sprintf("network.interfaces[%d]", i)
		if ifc.Name == "" && ifc.MAC == "" && len(n.Interfaces) > 1 {
			p.add(at, "name or mac required when several interfaces are listed")
		}
		if !ifc.DHCP && len(ifc.Addresses) == 0 {
			p.add(at, "needs dhcp: true or addresses")
		}
		if ifc.Name != "" {
			if !validIfName(ifc.Name) {
				p.add(at+".name", "%q is not a valid interface name", ifc.Name)
			} else if j, dup := names[ifc.Name]; dup {
				p.add(at+".name", "%q already used by network.interfaces[%d]", ifc.Name, j)
			}
			names[ifc.Name] = i
		}
		if ifc.MAC != "" {
			mac, err := net.ParseMAC(ifc.MAC)
			if err != nil || len(mac) != 6 {
				p.add(at+".mac", "invalid MAC address %q", ifc.MAC)
			} else if j, dup := macs[mac.String()]; dup {
				p.add(at+".mac", "%s already used by network.interfaces[%d]", mac, j)
			} else {
				macs[mac.String()] = i
			}
		}
		for j, a := range ifc.Addresses {
			if _, err := netip.ParsePrefix(a); err != nil {
				hint := ""
				if _, err := netip.ParseAddr(a); err == nil {
					hint = " (want address/prefix length, e.g. " + a + "/24)"
				}
				p.add(fmt.Sprintf("%s.addresses[%d]", at, j), "invalid CIDR %q%s", a, hint)
			}
		}
		if ifc.Gateway != "" {
			if _, err := netip.ParseAddr(ifc.Gateway); err != nil {
				p.add(at+".gateway", "invalid IP address %q", ifc.Gateway)
			}
		}
		if ifc.MTU != 0 && (ifc.MTU < 68 || ifc.MTU > 65535) {
			p.add(at+".mtu", "%d out of range 68-65535", ifc.MTU)
		}
	}
	for i, a := range n.DNS {
		if _, err := netip.ParseAddr(a); err != nil {
			p.add(fmt.Sprintf("network.dns[%d]", i), "invalid IP address %q", a)
		}
	}
	for i, d := range n.Search {
		if !ValidDomain(d) {
			p.add(fmt.Sprintf("network.search[%d]", i), "%q is not a valid domain name", d)
		}
	}
}

func (p *problems) pki(k *PKI) {
	switch {
	case k.CACert == "" && k.CAKey != "":
		p.add("pki", "caKey without caCert")
	case k.CACert == "" && k.NodeCACert != "":
		p.add("pki", "nodeCACert without caCert")
	case k.CACert == "":
		p.add("pki.caCert", "required")
	}
	pairs := []struct{ cert, key, certName, keyName string }{
		{k.NodeCACert, k.NodeCAKey, "nodeCACert", "nodeCAKey"},
		{k.Cert, k.Key, "cert", "key"},
	}
	forms := 0
	for _, pr := range pairs {
		if pr.cert != "" && pr.key == "" {
			p.add("pki", "%s without %s", pr.certName, pr.keyName)
		}
		if pr.key != "" && pr.cert == "" {
			p.add("pki", "%s without %s", pr.keyName, pr.certName)
		}
		if pr.cert != "" || pr.key != "" {
			forms++
		}
	}
	if k.CAKey != "" {
		forms++
	}
	switch {
	case forms > 1:
		p.add("pki", "nodeCACert/nodeCAKey, caKey and cert/key are exclusive")
	case forms == 0 && k.CACert != "":
		p.add("pki", "needs nodeCACert and nodeCAKey (to issue this node's certificates), caKey, or cert and key")
	}
	p.leafLifetime(k.LeafLifetime)

	ca := p.cert("pki.caCert", k.CACert)
	if ca != nil && !ca.IsCA {
		p.add("pki.caCert", "certificate %q is not a CA", ca.Subject.CommonName)
		ca = nil
	}
	if caKey := p.key("pki.caKey", k.CAKey); ca != nil && caKey != nil {
		if err := pki.KeyMatches(ca, caKey); err != nil {
			p.add("pki.caKey", "%v", err)
		}
	}
	p.nodeCA(k, ca)
	cert := p.cert("pki.cert", k.Cert)
	if cert != nil {
		if ca != nil {
			if err := cert.CheckSignatureFrom(ca); err != nil {
				p.add("pki.cert", "not signed by pki.caCert: %v", err)
			}
		}
		// The one certificate serves clients and peers, and dials peers.
		if len(cert.ExtKeyUsage) > 0 &&
			(!slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth)) {
			p.add("pki.cert", "needs both server and client auth key usages")
		}
	}
	if key := p.key("pki.key", k.Key); cert != nil && key != nil {
		if err := pki.KeyMatches(cert, key); err != nil {
			p.add("pki.key", "%v", err)
		}
	}
}

// nodeCA checks the node CA: a CA signed by the root ca, whose key matches.
func (p *problems) nodeCA(k *PKI, ca *x509.Certificate) {
	nodeCA := p.cert("pki.nodeCACert", k.NodeCACert)
	if nodeCA != nil {
		if !nodeCA.IsCA {
			p.add("pki.nodeCACert", "certificate %q is not a CA", nodeCA.Subject.CommonName)
		} else if ca != nil {
			if err := nodeCA.CheckSignatureFrom(ca); err != nil {
				p.add("pki.nodeCACert", "not signed by pki.caCert: %v", err)
			}
		}
	}
	if key := p.key("pki.nodeCAKey", k.NodeCAKey); nodeCA != nil && key != nil {
		if err := pki.KeyMatches(nodeCA, key); err != nil {
			p.add("pki.nodeCAKey", "%v", err)
		}
	}
}

// leafLifetime checks pki.leafLifetime.
func (p *problems) leafLifetime(text string) {
	if text == "" {
		return
	}
	d, err := time.ParseDuration(text)
	switch {
	case err != nil:
		p.add("pki.leafLifetime", "%q is not a duration (\"720h\", \"30m\")", text)
	case d < MinLeafLifetime || d > MaxLeafLifetime:
		p.add("pki.leafLifetime", "%s out of range %s-%s", d, MinLeafLifetime, MaxLeafLifetime)
	}
}

// port checks an optional port number.
func (p *problems) port(path string, n int) {
	if n != 0 && (n < 1 || n > 65535) {
		p.add(path, "port %d out of range 1-65535", n)
	}
}

const NameRule = "lowercase letters, digits and '-', at most 63 characters, not " + pki.AdminCommonName + " or " + pki.PeerCommonName

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidName reports whether s is a valid cluster or node name: a DNS label
// of lowercase letters, digits and '-', at most 63 characters. The names
// pki.AdminCommonName ("etcdbox-admin") and pki.PeerCommonName
// ("etcdbox-peer") are reserved: the common names of the admin
// certificates made before the admin URI, and of every peer leaf. A node
// (or an SRV target) called that would have its server leaf issued under
// that name.
func ValidName(s string) bool {
	return len(s) <= 63 && nameRE.MatchString(s) && s != pki.AdminCommonName && s != pki.PeerCommonName
}

// DefaultNodeName returns the node name to use when the seed has none: the
// first label of hostname when that is a valid name, else "etcd-" and the
// last three bytes of mac in hex, else "etcd".
func DefaultNodeName(hostname string, mac net.HardwareAddr) string {
	h, _, _ := strings.Cut(strings.ToLower(hostname), ".")
	if ValidName(h) && h != "localhost" {
		return h
	}
	if len(mac) >= 3 {
		return "etcd-" + hex.EncodeToString(mac[len(mac)-3:])
	}
	return "etcd"
}

var labelRE = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)

func ValidLabel(s string) bool {
	return len(s) <= 63 && labelRE.MatchString(s)
}

func ValidDomain(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !ValidLabel(l) {
			return false
		}
	}
	return true
}

func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return ValidDomain(s)
}

// validIfName follows the kernel's dev_valid_name.
func validIfName(s string) bool {
	return len(s) < 16 && s != "." && s != ".." && !strings.ContainsAny(s, "/: \t\n\r\v\f")
}

func or(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// problems collects FieldErrors.

func (p *problems) upgrade(u *Upgrade) {
	for i, r := range u.Registries {
		if problem := registryProblem(r); problem != "" {
			p.add(fmt.Sprintf("upgrade.registries[%d]", i), "%q: %s", r, problem)
		}
	}
	for i, r := range u.InsecureRegistries {
		host, port, err := net.SplitHostPort(r)
		if err != nil || host == "" || port == "" {
			p.add(fmt.Sprintf("upgrade.insecureRegistries[%d]", i), "%q: want host:port", r)
		}
	}
	for i, k := range u.TrustedKeys {
		if _, err := imagesig.ParsePublicKey(k); err != nil {
			p.add(fmt.Sprintf("upgrade.trustedKeys[%d]", i), "not a public key: %v", err)
		}
	}
	if u.Tries < 0 || u.Tries > 9 {
		p.add("upgrade.tries", "%d: want 1 to 9", u.Tries)
	}
	if u.SettleSeconds < 0 {
		p.add("upgrade.settleSeconds", "%d: negative", u.SettleSeconds)
	}
	if u.GateSeconds < 0 {
		p.add("upgrade.gateSeconds", "%d: negative", u.GateSeconds)
	}
	if u.GateSeconds > 0 && u.SettleSeconds >= u.GateSeconds {
		p.add("upgrade", "settleSeconds %d must be shorter than gateSeconds %d", u.SettleSeconds, u.GateSeconds)
	}
}

// recoveryTokenRE is nodeapi.RecoveryToken's form.
var recoveryTokenRE = regexp.MustCompile(`^recover-[0-9a-f]{1,16}-[0-9a-f]{1,16}$`)

func (p *problems) backup(b *Backup) {
	if i := b.Interval; i != "" && i != "0" {
		d, err := time.ParseDuration(i)
		switch {
		case err != nil:
			p.add("backup.interval", "%q: want a duration such as 30m or 1h, or 0 for no scheduled backups", i)
		case d < MinBackupInterval:
			p.add("backup.interval", "%q: shorter than %s", i, MinBackupInterval)
		}
	}
	if b.Keep < 0 || b.Keep > MaxBackupKeep {
		p.add("backup.keep", "%d: want 1 to %d", b.Keep, MaxBackupKeep)
	}
	if u := b.Push; u != nil {
		repo := u.Repository
		host, path, _ := strings.Cut(repo, "/")
		switch {
		case repo == "":
			p.add("backup.push.repository", "required: the OCI repository backups are pushed to (host[:port]/path)")
		case strings.Contains(repo, "://"):
			p.add("backup.push.repository", "%q: want host[:port]/path, without a scheme", repo)
		case registryProblem(host) != "":
			p.add("backup.push.repository", "%q: %s", repo, registryProblem(host))
		case path == "" || strings.ContainsAny(path, "@: \t") || path != strings.ToLower(path):
			p.add("backup.push.repository", "%q: want host[:port]/path, the path in lower case, without a tag or digest", repo)
		}
		if (u.Username == "") != (u.Password == "") {
			p.add("backup.push", "username and password: give both or neither")
		}
	}
}

// registryProblem says what is wrong with r as a registry name of an
// image reference ("registry.example.com", "10.0.0.1:5000"), or "".
func registryProblem(r string) string {
	switch {
	case r == "":
		return "empty"
	case strings.Contains(r, "://"):
		return "want a registry host (and port), without a scheme"
	case strings.ContainsAny(r, "/@ \t"):
		return "want a registry host (and port), without a path, digest or spaces"
	}
	if strings.Contains(r, ":") {
		if host, port, err := net.SplitHostPort(r); err != nil || host == "" || port == "" {
			return "want host or host:port"
		}
	}
	return ""
}
