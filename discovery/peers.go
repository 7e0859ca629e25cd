package discovery

import (
	"net"
	"slices"
	"strconv"
	"strings"
)

// PeerSet is the members a node expects in its cluster, each with a name,
// a host (a DNS name wherever DNS is available, so that a peer whose IP
// changes keeps its peer URL) and its ports. Names are unique.
//
// The order matters: Initial takes the first members as the expected
// initial members, and every node must compute the same set from the same
// input. StaticPeers keeps the seed's order; SRV sorts by name.
type PeerSet []Peer

// PeerURL is the URL etcd members use to reach p: https://host:peerPort.
func (p Peer) PeerURL() string {
	return "https://" + net.JoinHostPort(p.Host, strconv.Itoa(p.PeerPort))
}

// ClientURL is the URL clients use to reach p: https://host:clientPort.
func (p Peer) ClientURL() string {
	return "https://" + net.JoinHostPort(p.Host, strconv.Itoa(p.ClientPort))
}

// StaticPeers returns the seed's static peer list as a PeerSet, in the
// seed's order. Ports left zero take the defaults (DefaultPeerPort,
// DefaultClientPort); a seed that went through ApplyDefaults has none.
// Validate has already rejected duplicate names and addresses.
func StaticPeers(peers []Peer) PeerSet {
	s := make(PeerSet, len(peers))
	for i, p := range peers {
		if p.PeerPort == 0 {
			p.PeerPort = DefaultPeerPort
		}
		if p.ClientPort == 0 {
			p.ClientPort = DefaultClientPort
		}
		p.Host = strings.TrimSuffix(p.Host, ".")
		s[i] = p
	}
	return s
}

// InitialCluster returns etcd's --initial-cluster value for s:
// "n1=https://n1.example.internal:2380,n2=...", in the order of s.
func (s PeerSet) InitialCluster() string {
	parts := make([]string, len(s))
	for i, p := range s {
		parts[i] = p.Name + "=" + p.PeerURL()
	}
	return strings.Join(parts, ",")
}

// Names returns the peers' names in the order of s.
func (s PeerSet) Names() []string {
	names := make([]string, len(s))
	for i, p := range s {
		names[i] = p.Name
	}
	return names
}

// Contains reports whether s has a peer named name.
func (s PeerSet) Contains(name string) bool {
	_, ok := s.Get(name)
	return ok
}

// Get returns the peer named name.
func (s PeerSet) Get(name string) (Peer, bool) {
	i := slices.IndexFunc(s, func(p Peer) bool { return p.Name == name })
	if i < 0 {
		return Peer{}, false
	}
	return s[i], true
}

// ClientURLs returns the client URLs of every peer but the one named
// except (pass "" for all): the endpoints a node uses to reach the cluster
// before its own member runs.
func (s PeerSet) ClientURLs(except string) []string {
	var urls []string
	for _, p := range s {
		if p.Name != except {
			urls = append(urls, p.ClientURL())
		}
	}
	return urls
}

// Initial returns the first n peers of s (all of them when n exceeds
// len(s), none when n < 1): the expected initial members, the only nodes
// that may bootstrap the cluster (seed discovery.initialSize).
func (s PeerSet) Initial(n int) PeerSet {
	n = min(max(n, 0), len(s))
	return slices.Clone(s[:n])
}

// naturalLess orders names so that digit runs compare as numbers:
// n2 < n10, node-9 < node-10. Every node sorts SRV answers this way, so
// the expected initial members of "node1".."node12" with initialSize 3 are
// node1, node2 and node3, as an operator reads them.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
