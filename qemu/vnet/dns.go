package vnet

import (
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"
)

// DNSStats counts the queries the network's DNS server answered.
type DNSStats struct {
	Queries  uint64 `json:"queries"`
	Answers  uint64 `json:"answers"`  // NOERROR, with or without records
	NXDomain uint64 `json:"nxdomain"` // names under the domain that do not exist
	// Refused counts queries for names outside the cluster's domain (and
	// malformed ones). They are never forwarded anywhere: the server has
	// no upstream.
	Refused uint64 `json:"refused"`
}

// dnsServer answers the cluster's own names from the current zone and
// refuses everything else. It is authoritative for the domain and has
// no upstream and no cache: there is no code path that sends a query
// anywhere.
type dnsServer struct {
	zone                                *atomic.Pointer[zone]
	logf                                func(string, ...any)
	queries, answers, nxdomain, refused atomic.Uint64
}

func (s *dnsServer) stats() DNSStats {
	return DNSStats{Queries: s.queries.Load(), Answers: s.answers.Load(), NXDomain: s.nxdomain.Load(), Refused: s.refused.Load()}
}

// ServeDNS implements dns.Handler.
func (s *dnsServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	s.queries.Add(1)
	m := s.answer(r)
	switch m.Rcode {
	case dns.RcodeSuccess:
		s.answers.Add(1)
	case dns.RcodeNameError:
		s.nxdomain.Add(1)
	default:
		s.refused.Add(1)
		if len(r.Question) == 1 {
			s.logf("dns: refused %s %s from %s", dns.TypeToString[r.Question[0].Qtype], r.Question[0].Name, w.RemoteAddr())
		}
	}
	// A UDP answer never outgrows 512 bytes here unless a test stuffed
	// the zone; truncate rather than fragment, and the client retries
	// over TCP.
	if w.LocalAddr().Network() == "udp" {
		size := dns.MinMsgSize
		if o := r.IsEdns0(); o != nil {
			size = int(o.UDPSize())
		}
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}

// answer builds the reply to r.
func (s *dnsServer) answer(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = false
	if r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 {
		m.Rcode = dns.RcodeRefused
		return m
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	z := s.zone.Load()
	if (q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY) || !z.inZone(name) {
		m.Rcode = dns.RcodeRefused
		return m
	}
	m.Authoritative = true
	answer, extra, exists := z.lookup(name, q.Qtype)
	switch {
	case !exists && !z.hasBelow(name):
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{z.soa}
	case len(answer) == 0:
		m.Ns = []dns.RR{z.soa} // NODATA
	default:
		m.Answer, m.Extra = answer, extra
	}
	return m
}

// hasBelow reports whether some name under name exists (an "empty non-
// terminal" such as _tcp.<domain>, which is NODATA, not NXDOMAIN).
func (z *zone) hasBelow(name string) bool {
	for n := range z.records {
		if strings.HasSuffix(n, "."+name) {
			return true
		}
	}
	return false
}
