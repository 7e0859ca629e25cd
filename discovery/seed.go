package discovery

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-multierror"
	"sigs.k8s.io/yaml"

	"github.com/etcdbox/etcdbox/pki"
)

// Defaults applied by (*Seed).ApplyDefaults.
const (
	DefaultClientPort = 2379
	DefaultPeerPort   = 2380
	DefaultAPIPort    = 9379
)

// Seed is a node's configuration, read at boot. Field names are the YAML
// keys; sigs.k8s.io/yaml reads them from the json tags.
type Seed struct {
	// Cluster names the cluster. etcd's --initial-cluster-token is this
	// name and a hash of the forming members' nonces (member.Token).
	Cluster string `json:"cluster"`
	// Name is this node's name (etcd member name). Empty means the default
	// from DefaultNodeName.
	Name      string    `json:"name,omitempty"`
	Discovery Discovery `json:"discovery,omitzero"`
	Network   Network   `json:"network,omitzero"`
	PKI       PKI       `json:"pki,omitzero"`
	Etcd      Etcd      `json:"etcd,omitzero"`
	API       API       `json:"api,omitzero"`
	Upgrade   Upgrade   `json:"upgrade,omitzero"`
}

// Discovery says how a node finds its peers: DNS SRV records or a static
// list, never both.
type Discovery struct {
	// SRV is the domain whose _etcd-server-ssl._tcp records name the peers.
	SRV string `json:"srv,omitempty"`
	// SRVName is a service-name suffix, like etcd's --discovery-srv-name:
	// the records are then _etcd-server-ssl-<srvName>._tcp.<srv>.
	SRVName string `json:"srvName,omitempty"`
	// Peers is a static member list instead of SRV.
	Peers []Peer `json:"peers,omitempty"`
	// InitialSize is the number of members that bootstrap the cluster.
	// Default: len(Peers), or 1.
	InitialSize int `json:"initialSize,omitempty"`
}

// Peer is one member of a static peer list.
type Peer struct {
	Name string `json:"name"`
	// Host is an IP address or a DNS name.
	Host string `json:"host"`
	// PeerPort and ClientPort default to the seed's etcd ports.
	PeerPort   int `json:"peerPort,omitempty"`
	ClientPort int `json:"clientPort,omitempty"`
	// APIPort is the peer's node API port, which the formation handshake
	// asks before etcd starts; it defaults to the seed's api.port. Nodes
	// sharing a host (tests, one machine) need one each.
	APIPort int `json:"apiPort,omitempty"`
}

// Network configures the node's interfaces. Without interfaces the first
// non-loopback NIC uses DHCP.
type Network struct {
	Interfaces []Interface `json:"interfaces,omitempty"`
	// DNS lists name server addresses; Search lists search domains.
	DNS    []string `json:"dns,omitempty"`
	Search []string `json:"search,omitempty"`
}

// Interface configures one NIC, matched by kernel name or MAC address. An
// entry with neither matches the first non-loopback NIC; only a sole entry
// may omit both.
type Interface struct {
	Name string `json:"name,omitempty"`
	MAC  string `json:"mac,omitempty"`
	// DHCP asks for a DHCPv4 lease. An interface needs DHCP or Addresses.
	DHCP bool `json:"dhcp,omitempty"`
	// Addresses are static addresses with prefix length, 10.0.0.11/24;
	// after validation each parses with netip.ParsePrefix.
	Addresses []string `json:"addresses,omitempty"`
	Gateway   string   `json:"gateway,omitempty"`
	// MTU 0 keeps the driver's default.
	MTU int `json:"mtu,omitempty"`
}

// PKI holds PEM text. With CAKey the node issues its own leaves from
// CACert; with Cert and Key it uses them, and CACert is only the trust root.
type PKI struct {
	CACert string `json:"caCert,omitempty"`
	CAKey  string `json:"caKey,omitempty"`
	Cert   string `json:"cert,omitempty"`
	Key    string `json:"key,omitempty"`
}

// Etcd holds etcd's listener ports.
type Etcd struct {
	ClientPort int `json:"clientPort,omitempty"`
	PeerPort   int `json:"peerPort,omitempty"`
}

// API configures the node API.
type API struct {
	Port int `json:"port,omitempty"`
}

// Upgrade configures the upgrade agent and the slot health gate.
type Upgrade struct {
	// Registries, when set, are the only registries (host or host:port,
	// as in an image reference) a node pulls an upgrade from; a reference
	// to any other is refused before any network traffic. Unset, any
	// registry is pulled from.
	Registries []string `json:"registries,omitempty"`
	// InsecureRegistries may be reached over plain HTTP (host:port), e.g.
	// a registry on a closed local network; every byte staged is still
	// checked against the pinned digest.
	InsecureRegistries []string `json:"insecureRegistries,omitempty"`
	// Tries is how often systemd-boot tries a new slot before it falls
	// back (default 3).
	Tries int `json:"tries,omitempty"`
	// SettleSeconds is how long a new slot must stay healthy before it is
	// blessed (default 30); GateSeconds bounds the whole gate (default
	// 300): a slot not settled by then is marked bad and the node reboots
	// into the old one.
	SettleSeconds int `json:"settleSeconds,omitempty"`
	GateSeconds   int `json:"gateSeconds,omitempty"`
}

// Defaults of the upgrade section.
const (
	DefaultTries         = 3
	DefaultSettleSeconds = 30
	DefaultGateSeconds   = 300
)

// FieldError is one problem in a seed, at a key path such as
// network.interfaces[0].addresses[1].
type FieldError struct {
	Path    string
	Problem string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Problem }

// ParseSeed parses a YAML (or JSON) seed strictly, validates it and applies
// the defaults. Unknown keys, wrongly typed and malformed values are all
// reported at once, as a *multierror.Error of *FieldError values that each
// name their key path; YAML syntax errors and duplicate keys come back as a
// plain error with a line number. Values that YAML reads as numbers or
// booleans are not turned into strings: `name: 1` must be quoted. A seed
// over MaxSeedSize is refused unread (ErrSeedTooLarge).
func ParseSeed(data []byte) (*Seed, error) {
	if err := checkSeedSize(len(data)); err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse seed YAML: %w", err)
	}
	var tree any
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	if err := d.Decode(&tree); err != nil {
		return nil, fmt.Errorf("parse seed: %w", err)
	}
	var shape problems
	if tree != nil { // an empty document is an empty seed
		shape.checkShape("", tree, reflect.TypeFor[Seed]())
	}
	if _, ok := tree.(map[string]any); !ok && shape.errs != nil {
		return nil, shape.err() // not even a mapping
	}
	var s Seed
	if err := json.Unmarshal(j, &s); err != nil && shape.errs == nil {
		// checkShape should have caught everything decoding rejects.
		return nil, fmt.Errorf("parse seed: %w", err)
	}
	// Validate what did decode too, so that all problems show at once, but
	// drop its complaints about keys whose values were already reported
	// (a mistyped cluster is not also "required").
	reported := shape.paths()
	if err := s.Validate(); err != nil {
		for _, e := range err.(*multierror.Error).Errors {
			if fe, ok := e.(*FieldError); !ok || !covered(fe.Path, reported) {
				shape.errs = multierror.Append(shape.errs, e)
			}
		}
	}
	if err := shape.err(); err != nil {
		return nil, err
	}
	s.ApplyDefaults()
	return &s, nil
}

// Marshal validates s and returns it as YAML that ParseSeed reads back.
func (s *Seed) Marshal() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return yaml.Marshal(s)
}

// ApplyDefaults fills in zero ports and the initial size. The node name is
// not defaulted here; it needs the running system (DefaultNodeName).
func (s *Seed) ApplyDefaults() {
	if s.Etcd.ClientPort == 0 {
		s.Etcd.ClientPort = DefaultClientPort
	}
	if s.Etcd.PeerPort == 0 {
		s.Etcd.PeerPort = DefaultPeerPort
	}
	if s.API.Port == 0 {
		s.API.Port = DefaultAPIPort
	}
	for i := range s.Discovery.Peers {
		p := &s.Discovery.Peers[i]
		if p.PeerPort == 0 {
			p.PeerPort = s.Etcd.PeerPort
		}
		if p.ClientPort == 0 {
			p.ClientPort = s.Etcd.ClientPort
		}
	}
	if s.Discovery.InitialSize == 0 {
		s.Discovery.InitialSize = max(len(s.Discovery.Peers), 1)
	}
	s.Upgrade.Tries = or(s.Upgrade.Tries, DefaultTries)
	s.Upgrade.SettleSeconds = or(s.Upgrade.SettleSeconds, DefaultSettleSeconds)
	s.Upgrade.GateSeconds = or(s.Upgrade.GateSeconds, DefaultGateSeconds)
}

// Validate reports every problem of s at once, as a *multierror.Error of
// *FieldError values. Zero values that ApplyDefaults fills in are valid.
func (s *Seed) Validate() error {
	var p problems
	switch {
	case s.Cluster == "":
		p.add("cluster", "required")
	case !ValidName(s.Cluster):
		p.add("cluster", "%q is not a valid cluster name (%s)", s.Cluster, nameRule)
	}
	if s.Name != "" && !ValidName(s.Name) {
		p.add("name", "%q is not a valid node name (%s)", s.Name, nameRule)
	}
	p.discovery(&s.Discovery, s.Etcd.PeerPort)
	p.network(&s.Network)
	p.pki(&s.PKI)
	p.port("etcd.clientPort", s.Etcd.ClientPort)
	p.port("etcd.peerPort", s.Etcd.PeerPort)
	p.port("api.port", s.API.Port)
	p.upgrade(&s.Upgrade)
	client, peer, api := or(s.Etcd.ClientPort, DefaultClientPort), or(s.Etcd.PeerPort, DefaultPeerPort), or(s.API.Port, DefaultAPIPort)
	if client == peer {
		p.add("etcd", "clientPort and peerPort are both %d", client)
	}
	if api == client || api == peer {
		p.add("api.port", "%d is also an etcd port", api)
	}
	return p.err()
}

func (p *problems) discovery(d *Discovery, etcdPeerPort int) {
	if d.SRV != "" && len(d.Peers) > 0 {
		p.add("discovery", "srv and peers are exclusive")
	}
	if d.SRV != "" && !validDomain(d.SRV) {
		p.add("discovery.srv", "%q is not a valid domain name", d.SRV)
	}
	switch {
	case d.SRVName == "":
	case d.SRV == "":
		p.add("discovery.srvName", "needs discovery.srv")
	case !validLabel(d.SRVName):
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
			p.add(at+".name", "%q is not a valid node name (%s)", peer.Name, nameRule)
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
		if !validDomain(d) {
			p.add(fmt.Sprintf("network.search[%d]", i), "%q is not a valid domain name", d)
		}
	}
}

func (p *problems) pki(k *PKI) {
	switch {
	case k.CACert == "" && k.CAKey != "":
		p.add("pki", "caKey without caCert")
	case k.CACert == "":
		p.add("pki.caCert", "required")
	}
	if k.Cert != "" && k.Key == "" {
		p.add("pki", "cert without key")
	}
	if k.Key != "" && k.Cert == "" {
		p.add("pki", "key without cert")
	}
	if k.CAKey != "" && (k.Cert != "" || k.Key != "") {
		p.add("pki", "caKey and cert/key are exclusive")
	}
	if k.CACert != "" && k.CAKey == "" && k.Cert == "" && k.Key == "" {
		p.add("pki", "needs caKey (to issue this node's certificates) or cert and key")
	}

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

// port checks an optional port number.
func (p *problems) port(path string, n int) {
	if n != 0 && (n < 1 || n > 65535) {
		p.add(path, "port %d out of range 1-65535", n)
	}
}

const nameRule = "lowercase letters, digits and '-', at most 63 characters, not " + pki.AdminCommonName

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ValidName reports whether s is a valid cluster or node name: a DNS label
// of lowercase letters, digits and '-', at most 63 characters. The name
// pki.AdminCommonName ("etcdbox-admin") is reserved: it is the common name
// of the operator's admin certificate, and a node (or an SRV target)
// called that would have its leaves issued under the admin's name.
func ValidName(s string) bool {
	return len(s) <= 63 && nameRE.MatchString(s) && s != pki.AdminCommonName
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

func validLabel(s string) bool {
	return len(s) <= 63 && labelRE.MatchString(s)
}

func validDomain(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if !validLabel(l) {
			return false
		}
	}
	return true
}

func validHost(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return validDomain(s)
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
type problems struct {
	errs *multierror.Error
}

func (p *problems) add(path, format string, args ...any) {
	p.errs = multierror.Append(p.errs, &FieldError{Path: path, Problem: fmt.Sprintf(format, args...)})
}

// err returns the problems on one line each joined by "; ", which reads well
// on a serial console after "etcdbox: seed error: ".
func (p *problems) err() error {
	if p.errs == nil {
		return nil
	}
	p.errs.ErrorFormat = func(errs []error) string {
		s := make([]string, len(errs))
		for i, e := range errs {
			s[i] = e.Error()
		}
		return strings.Join(s, "; ")
	}
	return p.errs
}

// paths returns the key paths of the problems found so far.
func (p *problems) paths() []string {
	if p.errs == nil {
		return nil
	}
	var out []string
	for _, e := range p.errs.Errors {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe.Path)
		}
	}
	return out
}

// covered reports whether path is one of reported or lies below one.
func covered(path string, reported []string) bool {
	for _, r := range reported {
		if rest, ok := strings.CutPrefix(path, r); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
			return true
		}
	}
	return false
}

// cert parses optional PEM text at path, reporting a problem if it is bad.
func (p *problems) cert(path, text string) *x509.Certificate {
	if text == "" {
		return nil
	}
	c, err := pki.ParseCertPEM([]byte(text))
	if err != nil {
		p.add(path, "%v", err)
		return nil
	}
	return c
}

// key parses an optional PEM private key at path, reporting a problem if it
// is bad.
func (p *problems) key(path, text string) crypto.Signer {
	if text == "" {
		return nil
	}
	k, err := pki.ParseKeyPEM([]byte(text))
	if err != nil {
		p.add(path, "%v", err)
		return nil
	}
	return k
}

// checkShape compares the generic JSON tree v with the Go type t and reports
// unknown keys and wrongly typed values at their key paths. encoding/json
// would stop at the first of them, match keys case-insensitively, and name
// neither list indexes nor every problem.
func (p *problems) checkShape(path string, v any, t reflect.Type) {
	if v == nil {
		return // null: the zero value
	}
	at := path
	if at == "" {
		at = "seed"
	}
	switch t.Kind() {
	case reflect.Pointer:
		p.checkShape(path, v, t.Elem())
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			p.add(at, "want a mapping, got %s", describe(v))
			return
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kp := k
			if path != "" {
				kp = path + "." + k
			}
			f, ok := fields[k]
			if !ok {
				p.add(kp, "unknown key%s", suggest(k, fields))
				continue
			}
			p.checkShape(kp, m[k], f.Type)
		}
	case reflect.Slice:
		l, ok := v.([]any)
		if !ok {
			p.add(at, "want a list, got %s", describe(v))
			return
		}
		for i, e := range l {
			p.checkShape(fmt.Sprintf("%s[%d]", path, i), e, t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			p.add(at, "want a string, got %s", describe(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.add(at, "want true or false, got %s", describe(v))
		}
	case reflect.Int:
		n, ok := v.(json.Number)
		if !ok {
			p.add(at, "want an integer, got %s", describe(v))
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, 0); err != nil {
			p.add(at, "want an integer, got %s", describe(v))
		}
	default:
		panic(fmt.Sprintf("discovery: seed field %s has unsupported type %s", at, t))
	}
}

// jsonFields maps the json names of t's fields to the fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f
	}
	return m
}

// suggest names a known key that differs from k only in case.
func suggest(k string, fields map[string]reflect.StructField) string {
	for name := range fields {
		if strings.EqualFold(name, k) {
			return fmt.Sprintf(" (did you mean %q?)", name)
		}
	}
	return ""
}

func describe(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("string %q", v)
	case json.Number:
		return "number " + v.String()
	case bool:
		return fmt.Sprintf("boolean %t", v)
	default:
		return fmt.Sprintf("%T", v)
	}
}

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
