package vnet

import (
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dnsOnLoopback serves the DNS handler for a zone on 127.0.0.1 UDP (a
// test seam: in a network it serves on the gateway's address inside the
// gVisor stack) and returns its address and the server's counters.
func dnsOnLoopback(t *testing.T, z *zone) (string, *dnsServer) {
	t.Helper()
	var p atomic.Pointer[zone]
	p.Store(z)
	h := &dnsServer{zone: &p, logf: t.Logf}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(started) }}
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String(), h
}

func TestDNSAnswers(t *testing.T) {
	hosts := []Host{
		{Name: "n1", MAC: mac1, IP: ip1},
		{Name: "n2", MAC: mac2, IP: ip2},
		{Name: "n3", MAC: mac3, IP: ip3, SkipSRV: true},
	}
	addr, h := dnsOnLoopback(t, buildZone("demo.internal", "blue", hosts, nil, 1))
	tests := []struct {
		name  string
		qname string
		qtype uint16
		rcode int
		want  []string // answers, one line each without TTL, sorted
		extra int      // additional records
	}{
		{name: "A", qname: "n1.demo.internal.", qtype: dns.TypeA, want: []string{"n1.demo.internal. A 10.88.0.11"}},
		{name: "A any case", qname: "N2.Demo.Internal.", qtype: dns.TypeA, want: []string{"n2.demo.internal. A 10.88.0.12"}},
		{name: "A of a host left out of SRV", qname: "n3.demo.internal.", qtype: dns.TypeA, want: []string{"n3.demo.internal. A 10.88.0.13"}},
		{name: "AAAA is empty", qname: "n1.demo.internal.", qtype: dns.TypeAAAA},
		{name: "server SRV", qname: "_etcd-server-ssl._tcp.demo.internal.", qtype: dns.TypeSRV, extra: 2, want: []string{
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 10 2380 n1.demo.internal.",
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 10 2380 n2.demo.internal.",
		}},
		{name: "client SRV", qname: "_etcd-client-ssl._tcp.demo.internal.", qtype: dns.TypeSRV, extra: 2, want: []string{
			"_etcd-client-ssl._tcp.demo.internal. SRV 0 10 2379 n1.demo.internal.",
			"_etcd-client-ssl._tcp.demo.internal. SRV 0 10 2379 n2.demo.internal.",
		}},
		{name: "service-name SRV", qname: "_etcd-server-ssl-blue._tcp.demo.internal.", qtype: dns.TypeSRV, extra: 2, want: []string{
			"_etcd-server-ssl-blue._tcp.demo.internal. SRV 0 10 2380 n1.demo.internal.",
			"_etcd-server-ssl-blue._tcp.demo.internal. SRV 0 10 2380 n2.demo.internal.",
		}},
		{name: "other service name", qname: "_etcd-server-ssl-red._tcp.demo.internal.", qtype: dns.TypeSRV, rcode: dns.RcodeNameError},
		{name: "SRV name asked for A", qname: "_etcd-server-ssl._tcp.demo.internal.", qtype: dns.TypeA},
		{name: "empty non-terminal", qname: "_tcp.demo.internal.", qtype: dns.TypeSRV},
		{name: "apex SOA", qname: "demo.internal.", qtype: dns.TypeSOA, want: []string{
			"demo.internal. SOA demo.internal. hostmaster.demo.internal. 1 60 60 3600 5",
		}},
		{name: "unknown host", qname: "n9.demo.internal.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "outside", qname: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{name: "outside SRV", qname: "_etcd-server-ssl._tcp.example.com.", qtype: dns.TypeSRV, rcode: dns.RcodeRefused},
		{name: "suffix that is not a subdomain", qname: "xdemo.internal.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{name: "parent", qname: "internal.", qtype: dns.TypeNS, rcode: dns.RcodeRefused},
		{name: "root", qname: ".", qtype: dns.TypeNS, rcode: dns.RcodeRefused},
		{name: "reverse", qname: "11.0.88.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: dns.RcodeRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := new(dns.Msg)
			m.SetQuestion(tt.qname, tt.qtype)
			r, err := dns.Exchange(m, addr)
			require.NoError(t, err)
			assert.Equal(t, dns.RcodeToString[tt.rcode], dns.RcodeToString[r.Rcode], "rcode")
			assert.Equal(t, tt.want, rrLines(r.Answer), "answers")
			assert.Len(t, r.Extra, tt.extra, "additional records")
			assert.False(t, r.RecursionAvailable, "claims recursion")
			if tt.rcode != dns.RcodeRefused {
				assert.True(t, r.Authoritative, "not authoritative")
			}
			if tt.rcode == dns.RcodeNameError || (tt.rcode == dns.RcodeSuccess && len(tt.want) == 0) {
				require.Len(t, r.Ns, 1, "negative answer without SOA")
				assert.Equal(t, dns.TypeSOA, r.Ns[0].Header().Rrtype)
			}
		})
	}
	st := h.stats()
	assert.Equal(t, uint64(len(tests)), st.Queries)
	assert.Equal(t, uint64(6), st.Refused)
	assert.Equal(t, uint64(2), st.NXDomain)

	// A class other than IN is refused.
	m := new(dns.Msg)
	m.SetQuestion("n1.demo.internal.", dns.TypeA)
	m.Question[0].Qclass = dns.ClassCHAOS
	r, err := dns.Exchange(m, addr)
	require.NoError(t, err)
	assert.Equal(t, dns.RcodeRefused, r.Rcode)
}

func TestDNSRawSRV(t *testing.T) {
	hosts := []Host{{Name: "n1", MAC: mac1, IP: ip1}, {Name: "n2", MAC: mac2, IP: ip2}}
	tests := []struct {
		name  string
		srv   []SRV
		rcode int
		want  []string
	}{
		{name: "generated", srv: nil, want: []string{
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 10 2380 n1.demo.internal.",
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 10 2380 n2.demo.internal.",
		}},
		{name: "missing", srv: []SRV{}, rcode: dns.RcodeNameError},
		{name: "this node twice", srv: []SRV{
			{Name: "_etcd-server-ssl._tcp", Target: "n1", Port: 2380},
			{Name: "_etcd-server-ssl._tcp", Target: "n1.demo.internal.", Port: 2380},
		}, want: []string{
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 0 2380 n1.demo.internal.",
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 0 2380 n1.demo.internal.",
		}},
		{name: "unknown host", srv: []SRV{{Name: "_etcd-server-ssl._tcp", Target: "ghost", Port: 2380}}, want: []string{
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 0 2380 ghost.demo.internal.",
		}},
		{name: "no such service", srv: []SRV{{Name: "_etcd-server-ssl._tcp", Target: ".", Port: 0}}, want: []string{
			"_etcd-server-ssl._tcp.demo.internal. SRV 0 0 0 .",
		}},
		{name: "not etcd", srv: []SRV{{Name: "_etcd-server-ssl._tcp", Target: "n2", Port: 22, Priority: 1, Weight: 5}}, want: []string{
			"_etcd-server-ssl._tcp.demo.internal. SRV 1 5 22 n2.demo.internal.",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, _ := dnsOnLoopback(t, buildZone("demo.internal", "", hosts, tt.srv, 1))
			m := new(dns.Msg)
			m.SetQuestion("_etcd-server-ssl._tcp.demo.internal.", dns.TypeSRV)
			r, err := dns.Exchange(m, addr)
			require.NoError(t, err)
			assert.Equal(t, dns.RcodeToString[tt.rcode], dns.RcodeToString[r.Rcode])
			assert.Equal(t, tt.want, rrLines(r.Answer))
		})
	}
}

// rrLines renders records without their TTL, sorted.
func rrLines(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		f := strings.Fields(rr.String())
		// name TTL class type rdata...: drop TTL and class
		out = append(out, strings.Join(append([]string{f[0]}, f[3:]...), " "))
	}
	sort.Strings(out)
	return out
}
