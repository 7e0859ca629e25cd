package discovery

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/seed"
)

// zone maps an owner name (lowercase, rooted) to its records in zone-file
// syntax. A name mapped to no records exists but has none (NODATA); a name
// not in the map is NXDOMAIN.
type zone map[string][]string

// dnsServer is an in-process authoritative server on 127.0.0.1 (UDP) that
// answers from a zone, and counts the questions it got.
type dnsServer struct {
	addr string
	mu   sync.Mutex
	zone zone
	asks map[string]int // "name TYPE" -> count
}

func newDNSServer(t *testing.T, z zone) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &dnsServer{addr: pc.LocalAddr().String(), zone: z, asks: map[string]int{}}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: s, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

func (s *dnsServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range req.Question {
		name := strings.ToLower(q.Name)
		s.asks[name+" "+dns.TypeToString[q.Qtype]]++
		rrs, ok := s.zone[name]
		if !ok {
			m.Rcode = dns.RcodeNameError
			continue
		}
		for _, text := range rrs {
			rr, err := dns.NewRR(name + " 60 IN " + text)
			if err != nil {
				panic(err)
			}
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			}
		}
	}
	_ = w.WriteMsg(m)
}

func (s *dnsServer) asked(name, typ string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asks[name+" "+typ]
}

const (
	srvServerName = "_etcd-server-ssl._tcp.example.internal."
	srvClientName = "_etcd-client-ssl._tcp.example.internal."
)

// goodZone is a three-node cluster with client records, and addresses for
// each node, one of them IPv6 only.
func goodZone() zone {
	return zone{
		srvServerName: {
			"SRV 0 0 2380 n3.example.internal.",
			"SRV 0 0 2380 n1.example.internal.",
			"SRV 10 5 2380 n2.example.internal.",
		},
		srvClientName: {
			"SRV 0 0 2379 n1.example.internal.",
			"SRV 0 0 12379 n2.example.internal.",
			"SRV 0 0 2379 n3.example.internal.",
		},
		"n1.example.internal.": {"A 10.0.0.11"},
		"n2.example.internal.": {"A 10.0.0.12", "AAAA fd00::12"},
		"n3.example.internal.": {"AAAA fd00::13"},
	}
}

func lookup(t *testing.T, z zone, svc string) (PeerSet, error) {
	t.Helper()
	s := newDNSServer(t, z)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	return SRV(ctx, ResolverAt(s.addr), "example.internal", svc)
}

func TestSRVGood(t *testing.T) {
	s := newDNSServer(t, goodZone())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got, err := SRV(ctx, ResolverAt(s.addr), "example.internal.", "")
	require.NoError(t, err)
	want := PeerSet{
		{Name: "n1", Host: "n1.example.internal", PeerPort: 2380, ClientPort: 2379},
		{Name: "n2", Host: "n2.example.internal", PeerPort: 2380, ClientPort: 12379},
		{Name: "n3", Host: "n3.example.internal", PeerPort: 2380, ClientPort: 2379},
	}
	assert.Equal(t, want, got)
	assert.Equal(t, "n1=https://n1.example.internal:2380,n2=https://n2.example.internal:2380,n3=https://n3.example.internal:2380",
		got.InitialCluster())
	assert.Equal(t, []string{"https://n1.example.internal:2379", "https://n3.example.internal:2379"}, got.ClientURLs("n2"))
	// Every target was resolved, by name.
	for _, n := range []string{"n1", "n2", "n3"} {
		assert.Positive(t, s.asked(n+".example.internal.", "A")+s.asked(n+".example.internal.", "AAAA"), n)
	}
}

func TestSRVServiceName(t *testing.T) {
	z := zone{
		// The plain records name another cluster; the service name selects.
		srvServerName: {"SRV 0 0 2380 other.example.internal."},
		"_etcd-server-ssl-blue._tcp.example.internal.": {
			"SRV 0 0 2480 b1.example.internal.",
			"SRV 0 0 2480 b2.example.internal.",
		},
		"_etcd-client-ssl-blue._tcp.example.internal.": {
			"SRV 0 0 2479 b1.example.internal.",
			"SRV 0 0 2479 b2.example.internal.",
		},
		"b1.example.internal.":    {"A 10.0.1.1"},
		"b2.example.internal.":    {"A 10.0.1.2"},
		"other.example.internal.": {"A 10.0.9.9"},
	}
	got, err := lookup(t, z, "blue")
	require.NoError(t, err)
	assert.Equal(t, PeerSet{
		{Name: "b1", Host: "b1.example.internal", PeerPort: 2480, ClientPort: 2479},
		{Name: "b2", Host: "b2.example.internal", PeerPort: 2480, ClientPort: 2479},
	}, got)
	server, client := SRVNames("example.internal", "blue")
	assert.Equal(t, "_etcd-server-ssl-blue._tcp.example.internal", server)
	assert.Equal(t, "_etcd-client-ssl-blue._tcp.example.internal", client)
}

func TestSRVNoClientRecords(t *testing.T) {
	z := goodZone()
	delete(z, srvClientName)
	got, err := lookup(t, z, "")
	require.NoError(t, err)
	for _, p := range got {
		assert.Equal(t, seed.DefaultClientPort, p.ClientPort, p.Name)
	}
}

func TestSRVNaturalOrder(t *testing.T) {
	z := zone{srvServerName: nil}
	for _, n := range []string{"node10", "node2", "node1", "node11", "node3"} {
		z[srvServerName] = append(z[srvServerName], "SRV 0 0 2380 "+n+".example.internal.")
		z[n+".example.internal."] = []string{"A 10.0.0.1" + n[4:]}
	}
	got, err := lookup(t, z, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"node1", "node2", "node3", "node10", "node11"}, got.Names())
	initial, err := got.Initial(3)
	require.NoError(t, err)
	assert.Equal(t, []string{"node1", "node2", "node3"}, initial.Names())
}

func TestSRVExactDuplicateCountsOnce(t *testing.T) {
	z := goodZone()
	// The same record, differing only in priority and weight.
	z[srvServerName] = append(z[srvServerName], "SRV 5 5 2380 N1.example.internal.")
	got, err := lookup(t, z, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"n1", "n2", "n3"}, got.Names())
}

func TestSRVHostile(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(z zone)
		noRecs bool     // wraps ErrNoRecords
		want   []string // substrings of the error
	}{
		{
			name:   "missing",
			edit:   func(z zone) { delete(z, srvServerName) },
			noRecs: true,
			want:   []string{"_etcd-server-ssl._tcp.example.internal", "no SRV records"},
		},
		{
			name:   "empty",
			edit:   func(z zone) { z[srvServerName] = nil },
			noRecs: true,
			want:   []string{"_etcd-server-ssl._tcp.example.internal", "no SRV records"},
		},
		{
			name:   "service name without records",
			edit:   func(z zone) {},
			noRecs: true,
			want:   []string{"_etcd-server-ssl-green._tcp.example.internal: no SRV records"},
		},
		{
			name: "unknown target host",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName], "SRV 0 0 2380 n4.example.internal.")
			},
			want: []string{"SRV target n4.example.internal has no address"},
		},
		{
			name: "target without addresses",
			edit: func(z zone) { z["n3.example.internal."] = []string{"TXT \"no address here\""} },
			want: []string{"SRV target n3.example.internal has no address"},
		},
		{
			name: "this node listed twice with another port",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName], "SRV 0 0 2390 n1.example.internal.")
			},
			want: []string{"n1 is listed twice (n1.example.internal:2380 and n1.example.internal:2390)"},
		},
		{
			name: "this node listed twice under two names",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName], "SRV 0 0 2380 n1-alias.example.internal.")
				z["n1-alias.example.internal."] = []string{"A 10.0.0.11"}
			},
			want: []string{"n1 and n1-alias are the same node: both resolve to 10.0.0.11:2380"},
		},
		{
			name: "target outside the domain",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName], "SRV 0 0 2380 n4.attacker.example.")
				z["n4.attacker.example."] = []string{"A 10.6.6.6"}
			},
			want: []string{"SRV target n4.attacker.example is outside example.internal"},
		},
		{
			name: "target in a subdomain",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName], "SRV 0 0 2380 n4.rack1.example.internal.")
				z["n4.rack1.example.internal."] = []string{"A 10.0.0.14"}
			},
			want: []string{"SRV target n4.rack1.example.internal is not directly under example.internal"},
		},
		{
			name: "service not available",
			edit: func(z zone) { z[srvServerName] = []string{"SRV 0 0 0 ."} },
			want: []string{"service is not available"},
		},
		{
			name: "invalid node name",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName], "SRV 0 0 2380 n_4.example.internal.")
				z["n_4.example.internal."] = []string{"A 10.0.0.14"}
			},
			want: []string{`SRV target n_4.example.internal: "n_4" is not a valid node name`},
		},
		{
			// Go's resolver refuses names that are not host names at all.
			name: "malformed target",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName], "SRV 0 0 2380 -bad.example.internal.")
			},
			want: []string{"_etcd-server-ssl._tcp.example.internal", "invalid names"},
		},
		{
			name: "every problem at once",
			edit: func(z zone) {
				z[srvServerName] = append(z[srvServerName],
					"SRV 0 0 2380 n4.example.internal.", "SRV 0 0 2380 n5.elsewhere.")
			},
			want: []string{"n4.example.internal has no address", "n5.elsewhere is outside example.internal"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z := goodZone()
			tt.edit(z)
			svc := ""
			if strings.HasPrefix(tt.name, "service name") {
				svc = "green"
			}
			got, err := lookup(t, z, svc)
			require.Error(t, err, "SRV = %v, want an error", got)
			assert.Nil(t, got)
			assert.Equal(t, tt.noRecs, errors.Is(err, ErrNoRecords), "errors.Is(%v, ErrNoRecords)", err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestSRVServerDown(t *testing.T) {
	// A port that nothing answers on: the lookup fails, without
	// claiming the records are missing.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := pc.LocalAddr().String()
	require.NoError(t, pc.Close())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err = SRV(ctx, ResolverAt(addr), "example.internal", "")
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrNoRecords), "error %v wraps ErrNoRecords", err)
	assert.Contains(t, err.Error(), "_etcd-server-ssl._tcp.example.internal")
}
