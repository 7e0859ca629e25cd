package discovery

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/etcdbox/etcdbox/seed"
)

// PeerSet is the members a node expects in its cluster, each with a name,
// a host (a DNS name wherever DNS is available, so that a peer whose IP
// changes keeps its peer URL) and its ports. Names are unique.
//
// The order matters: Initial takes the first members as the expected
// initial members, and every node must compute the same set from the same
// input. StaticPeers keeps the seed's order; SRV sorts by name (natural
// order, so n2 comes before n10).
type PeerSet []seed.Peer

// StaticPeers returns the seed's static peer list as a PeerSet, in the
// seed's order. Ports left zero take the defaults (seed.DefaultPeerPort,
// seed.DefaultClientPort); a seed that went through ApplyDefaults has none.
// Validate has already rejected duplicate names and addresses.
func StaticPeers(peers []seed.Peer) PeerSet {
	s := make(PeerSet, len(peers))
	for i, p := range peers {
		if p.PeerPort == 0 {
			p.PeerPort = seed.DefaultPeerPort
		}
		if p.ClientPort == 0 {
			p.ClientPort = seed.DefaultClientPort
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
func (s PeerSet) Get(name string) (seed.Peer, bool) {
	i := slices.IndexFunc(s, func(p seed.Peer) bool { return p.Name == name })
	if i < 0 {
		return seed.Peer{}, false
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

// Initial returns the expected initial members: the first n peers of s
// (n is the seed's discovery.initialSize). They are the only nodes that
// may bootstrap the cluster, and they bootstrap it together, so a set
// that lists fewer than n peers is an error, an *IncompleteError saying
// how many are missing and, where the listed names tell, who. No partial
// set is returned: a node that took what it sees as the initial members
// would bootstrap a cluster of one (or two) under the shared name, and
// the nodes that appear later would form another. A bootstrap waits until
// every expected initial member is listed.
//
// Initial depends only on s and n, and s is ordered the same way on every
// node (SRV sorts by name, StaticPeers keeps the seed's order), so every
// node that sees the same answer computes the same initial members. Nodes
// that see different answers (a DNS change still propagating) may not;
// that is why a bootstrap also needs every expected member to answer that
// it has never formed a cluster (DESIGN §5).
//
// An n below 1 is an error too: a cluster has at least one member.
func (s PeerSet) Initial(n int) (PeerSet, error) {
	if n < 1 {
		return nil, fmt.Errorf("initial size %d: want at least 1", n)
	}
	if len(s) < n {
		listed := s.Names()
		return nil, &IncompleteError{Want: n, Listed: listed, Missing: numberedMissing(listed, n)}
	}
	return slices.Clone(s[:n]), nil
}

// IncompleteError is Initial's error for a peer set with fewer peers than
// the expected initial members.
type IncompleteError struct {
	// Want is the initial size asked for.
	Want int
	// Listed are the names the set has, in its order.
	Listed []string
	// Missing are the names of the absent members when the listed names
	// are numbered (n1, n2 ... or node01, node02 ...): with n1 listed
	// and 3 wanted, n2 and n3. It is nil when the names do not tell.
	Missing []string
}

func (e *IncompleteError) Error() string {
	listed := "none"
	if len(e.Listed) > 0 {
		listed = strings.Join(e.Listed, ", ")
	}
	msg := fmt.Sprintf("%d of %d expected initial members missing (listed: %s)", e.Want-len(e.Listed), e.Want, listed)
	if len(e.Missing) > 0 {
		msg += fmt.Sprintf("; by their numbering the missing are %s", strings.Join(e.Missing, ", "))
	}
	return msg
}

var numberedRE = regexp.MustCompile(`^(.*?)([0-9]+)$`)

// numberedMissing guesses the names of the expected initial members that
// listed lacks, when every listed name is one prefix and a number, counted
// from 1 (or from 0 when a 0 is listed), and every listed number is one of
// the first n. Zero-padded numbers (node01) keep their width. It returns
// nil when the names do not follow that pattern, rather than guess wrong.
func numberedMissing(listed []string, n int) []string {
	if len(listed) == 0 || len(listed) >= n {
		return nil
	}
	prefix, width, padded := "", 0, false
	nums := map[int]bool{}
	for i, name := range listed {
		m := numberedRE.FindStringSubmatch(name)
		if m == nil {
			return nil
		}
		num, err := strconv.Atoi(m[2])
		switch {
		case err != nil, nums[num], i > 0 && m[1] != prefix:
			return nil
		case i == 0:
			prefix, width = m[1], len(m[2])
		case len(m[2]) != width:
			width = -1 // widths differ: fine unless some are padded
		}
		padded = padded || len(m[2]) > 1 && m[2][0] == '0'
		nums[num] = true
	}
	if padded && width < 0 {
		return nil // n01 and n100: no telling the width
	}
	first := 1
	if nums[0] {
		first = 0
	}
	var missing []string
	for k := first; k < first+n; k++ {
		if nums[k] {
			delete(nums, k)
			continue
		}
		d := strconv.Itoa(k)
		if padded && len(d) < width {
			d = strings.Repeat("0", width-len(d)) + d
		}
		missing = append(missing, prefix+d)
	}
	if len(nums) > 0 {
		return nil // a listed number beyond the first n: no telling
	}
	return missing
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
