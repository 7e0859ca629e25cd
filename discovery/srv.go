package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-multierror"

	"github.com/etcdbox/etcdbox/seed"
)

// ErrNoRecords means the domain has no etcd server SRV records: the name
// does not exist (NXDOMAIN) or has no SRV answer. A node that sees it waits
// and asks again; DNS may not be populated yet.
var ErrNoRecords = errors.New("no SRV records")

// Resolver is the part of *net.Resolver that SRV uses. ResolverAt returns
// one that asks a given DNS server; net.DefaultResolver uses the system's.
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
	LookupHost(ctx context.Context, host string) (addrs []string, err error)
}

// ResolverAt returns a resolver that sends every query to the DNS server
// at addr ("10.0.0.1:53"), over UDP, or TCP for truncated answers. It uses
// Go's own resolver, so no libc is involved; it still reads /etc/hosts.
func ResolverAt(addr string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
}

// MaxSRVRecords is the most records SRV accepts in one answer (server or
// client records). A cluster has a handful of members (etcd advises at
// most 7 voters); an answer with dozens more is a misconfigured zone or a
// hostile one, and each record costs a lookup.
const MaxSRVRecords = 64

// SRV services, as etcd's --discovery-srv uses them.
const (
	srvServer = "etcd-server-ssl"
	srvClient = "etcd-client-ssl"
)

// SRVNames returns the SRV record names SRV looks up for domain and
// serviceName: _etcd-server-ssl[-<svc>]._tcp.<domain> for the peers and
// _etcd-client-ssl[-<svc>]._tcp.<domain> for their client ports.
func SRVNames(domain, serviceName string) (server, client string) {
	suffix := ""
	if serviceName != "" {
		suffix = "-" + serviceName
	}
	domain = strings.TrimSuffix(domain, ".")
	return "_" + srvServer + suffix + "._tcp." + domain, "_" + srvClient + suffix + "._tcp." + domain
}

// SRV returns the peer set that domain's SRV records describe, sorted by
// name (natural order: n2 before n10).
//
// The peers are the targets of _etcd-server-ssl._tcp.<domain>, or of
// _etcd-server-ssl-<serviceName>._tcp.<domain> when serviceName is set, as
// etcd's --discovery-srv-name does. A peer's name is the first label of its
// target, its Host the target without the trailing dot (peers are
// addressed by DNS name) and its PeerPort the record's port. Its ClientPort
// comes from the matching target of _etcd-client-ssl[-<svc>]._tcp.<domain>
// when that name has records, and is seed.DefaultClientPort otherwise.
//
// DNS answers are untrusted input. SRV checks the answer and reports every
// problem at once, each naming the record or target, in a
// *multierror.Error:
//   - no records at all (NXDOMAIN or an empty answer) wraps ErrNoRecords;
//   - more than MaxSRVRecords records in either answer is an error that
//     names the record name and the count (nothing else is checked then);
//   - a target must be <name>.<domain>, exactly one valid node name under
//     the domain, since nodes issue their certificates for that name;
//   - a port must not be 0, and a node's client port must differ from its
//     peer port;
//   - every target must resolve to at least one A or AAAA address, none of
//     them unspecified (0.0.0.0, ::) or multicast;
//   - a name listed twice is an error when the two records disagree (other
//     target or port), and two names with the same address and port are an
//     error: either would make two members of one node. A record repeated
//     exactly is counted once (DNS servers do that themselves). Client
//     records follow the same rule; a client record for a target that has
//     no server record is ignored.
//
// No partial set is returned: a peer that is missing or wrong would change
// the expected initial members, so the caller waits and asks again.
func SRV(ctx context.Context, r Resolver, domain, serviceName string) (PeerSet, error) {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if !seed.ValidDomain(domain) {
		return nil, fmt.Errorf("SRV domain %q is not a valid domain name", domain)
	}
	if serviceName != "" && !seed.ValidLabel(serviceName) {
		return nil, fmt.Errorf("SRV service name %q is not a valid DNS label", serviceName)
	}
	c := srvCheck{domain: domain}
	c.serverName, c.clientName = SRVNames(domain, serviceName)
	suffix := ""
	if serviceName != "" {
		suffix = "-" + serviceName
	}
	// The rooted name keeps the resolver from trying search domains.
	_, servers, err := r.LookupSRV(ctx, srvServer+suffix, "tcp", domain+".")
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("lookup %s: %w", c.serverName, ErrNoRecords)
		}
		return nil, fmt.Errorf("lookup %s: %w", c.serverName, err)
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("lookup %s: %w", c.serverName, ErrNoRecords)
	}
	if len(servers) > MaxSRVRecords {
		return nil, fmt.Errorf("lookup %s: %d SRV records, more than the %d accepted", c.serverName, len(servers), MaxSRVRecords)
	}
	_, clients, err := r.LookupSRV(ctx, srvClient+suffix, "tcp", domain+".")
	switch {
	case err == nil:
	case isNotFound(err):
		// No client records: every peer uses the default client port.
	default:
		return nil, fmt.Errorf("lookup %s: %w", c.clientName, err)
	}
	if len(clients) > MaxSRVRecords {
		return nil, fmt.Errorf("lookup %s: %d SRV records, more than the %d accepted", c.clientName, len(clients), MaxSRVRecords)
	}

	set := c.peers(servers, c.clientPorts(clients))
	c.resolve(ctx, r, set)
	if err := c.problems.ErrorOrNil(); err != nil {
		return nil, err
	}
	slices.SortFunc(set, func(a, b seed.Peer) int {
		switch {
		case naturalLess(a.Name, b.Name):
			return -1
		case naturalLess(b.Name, a.Name):
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return set, nil
}

// srvCheck collects what is wrong with one domain's SRV answers, so that
// SRV reports every problem at once.
type srvCheck struct {
	domain, serverName, clientName string
	problems                       *multierror.Error
}

func (c *srvCheck) fail(format string, args ...any) {
	c.problems = multierror.Append(c.problems, fmt.Errorf(format, args...))
}

// clientPorts maps each client record's target to its port.
func (c *srvCheck) clientPorts(clients []*net.SRV) map[string]uint16 {
	ports := map[string]uint16{}
	for _, r := range clients {
		target := canonicalTarget(r.Target)
		switch prev, dup := ports[target]; {
		case r.Port == 0:
			c.fail("%s: SRV target %s has port 0", c.clientName, target)
		case dup && prev != r.Port:
			c.fail("%s: %s is listed twice (ports %d and %d)", c.clientName, target, prev, r.Port)
		default:
			ports[target] = r.Port
		}
	}
	return ports
}

// peers turns the server records into peers, each named by the first
// label of its target, with its client port from clientPorts.
func (c *srvCheck) peers(servers []*net.SRV, clientPorts map[string]uint16) PeerSet {
	byName := map[string]seed.Peer{}
	var set PeerSet
	for _, r := range servers {
		target := canonicalTarget(r.Target)
		name, ok := c.nodeName(target, r.Port)
		if !ok {
			continue
		}
		p := seed.Peer{Name: name, Host: target, PeerPort: int(r.Port), ClientPort: seed.DefaultClientPort}
		if cp, ok := clientPorts[target]; ok {
			p.ClientPort = int(cp)
		}
		if p.ClientPort == p.PeerPort {
			c.fail("%s and %s: %s has client port %d, the same as its peer port", c.serverName, c.clientName, target, p.PeerPort)
			continue
		}
		if prev, dup := byName[name]; dup {
			if prev != p {
				c.fail("%s: %s is listed twice (%s and %s)", c.serverName, name,
					net.JoinHostPort(prev.Host, strconv.Itoa(prev.PeerPort)), net.JoinHostPort(p.Host, strconv.Itoa(p.PeerPort)))
			}
			continue
		}
		byName[name] = p
		set = append(set, p)
	}
	return set
}

// nodeName returns the node name of a server record's target, which must
// be <name>.<domain>, with a port.
func (c *srvCheck) nodeName(target string, port uint16) (string, bool) {
	name, rest, _ := strings.Cut(target, ".")
	switch {
	case target == "":
		c.fail("%s: a target of \".\" means the service is not available", c.serverName)
	case rest != c.domain && !strings.HasSuffix(rest, "."+c.domain):
		c.fail("%s: SRV target %s is outside %s", c.serverName, target, c.domain)
	case rest != c.domain:
		c.fail("%s: SRV target %s is not directly under %s (want <name>.%s)", c.serverName, target, c.domain, c.domain)
	case !seed.ValidName(name):
		c.fail("%s: SRV target %s: %q is not a valid node name (%s)", c.serverName, target, name, seed.NameRule)
	case port == 0:
		c.fail("%s: SRV target %s has port 0", c.serverName, target)
	default:
		return name, true
	}
	return "", false
}

// resolve looks up every peer's host, concurrently (one slow name must
// not add up), and checks that each has an address of a host and that no
// two peers are the same node.
func (c *srvCheck) resolve(ctx context.Context, r Resolver, set PeerSet) {
	addrs := make([][]string, len(set))
	errs := make([]error, len(set))
	var wg sync.WaitGroup
	for i, p := range set {
		wg.Go(func() { addrs[i], errs[i] = r.LookupHost(ctx, p.Host+".") })
	}
	wg.Wait()
	endpoints := map[string]string{} // ip:peerPort -> name
	for i, p := range set {
		switch {
		case errs[i] != nil && isNotFound(errs[i]), errs[i] == nil && len(addrs[i]) == 0:
			c.fail("SRV target %s has no address", p.Host)
			continue
		case errs[i] != nil:
			c.fail("resolve SRV target %s: %w", p.Host, errs[i])
			continue
		}
		for _, a := range addrs[i] {
			if ip := net.ParseIP(a); ip != nil && (ip.IsUnspecified() || ip.IsMulticast()) {
				c.fail("SRV target %s resolves to %s, which is not a host's address", p.Host, a)
				continue
			}
			ep := net.JoinHostPort(a, strconv.Itoa(p.PeerPort))
			if other, dup := endpoints[ep]; dup && other != p.Name {
				c.fail("%s: %s and %s are the same node: both resolve to %s", c.serverName, other, p.Name, ep)
				continue
			}
			endpoints[ep] = p.Name
		}
	}
}

// canonicalTarget lowercases an SRV target and drops its trailing dot.
func canonicalTarget(t string) string {
	return strings.ToLower(strings.TrimSuffix(t, "."))
}

func isNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}
