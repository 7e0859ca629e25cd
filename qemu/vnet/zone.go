package vnet

import (
	"strings"

	"github.com/miekg/dns"
)

// ttl is the TTL of every answer: short, because hosts come and go while
// a test runs.
const ttl = 5

// zone is an immutable snapshot of the network's names and leases: the
// DNS server and the DHCP server read the current one without locks, and
// every change builds a new one.
type zone struct {
	domain  string              // "etcdbox.internal." (lowercase FQDN)
	records map[string][]dns.RR // by lowercase owner FQDN
	leases  map[string]Host     // by MAC text
	soa     *dns.SOA            // the apex's SOA, also sent with negative answers
}

// srvOwners returns the owner names of the generated SRV records:
// service, port pairs, relative to the domain.
func srvOwners(srvName string) []struct {
	name string
	port uint16
} {
	type owner = struct {
		name string
		port uint16
	}
	out := []owner{{"_etcd-server-ssl._tcp", PeerPort}, {"_etcd-client-ssl._tcp", ClientPort}}
	if srvName != "" {
		out = append(out,
			owner{"_etcd-server-ssl-" + srvName + "._tcp", PeerPort},
			owner{"_etcd-client-ssl-" + srvName + "._tcp", ClientPort})
	}
	return out
}

// buildZone makes the snapshot for hosts. srv, when non-nil, replaces
// every generated SRV record (an empty, non-nil srv means no SRV records
// at all). serial numbers the snapshot in the SOA.
func buildZone(domain, srvName string, hosts []Host, srv []SRV, serial uint32) *zone {
	z := &zone{
		domain:  dns.Fqdn(domain),
		records: map[string][]dns.RR{},
		leases:  map[string]Host{},
	}
	z.soa = &dns.SOA{
		Hdr:    dns.RR_Header{Name: z.domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: ttl},
		Ns:     z.domain,
		Mbox:   "hostmaster." + z.domain,
		Serial: serial,
		// Nothing transfers this zone; the timers only need to be sane.
		Refresh: 60, Retry: 60, Expire: 3600, Minttl: ttl,
	}
	z.add(z.soa)
	for _, h := range hosts {
		z.leases[h.MAC.String()] = h
		z.add(&dns.A{
			Hdr: dns.RR_Header{Name: h.Name + "." + z.domain, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl},
			A:   h.IP.AsSlice(),
		})
	}
	if srv == nil {
		for _, o := range srvOwners(srvName) {
			for _, h := range hosts {
				if h.SkipSRV {
					continue
				}
				srv = append(srv, SRV{Name: o.name, Target: h.Name, Port: o.port, Weight: 10})
			}
		}
	}
	for _, s := range srv {
		z.add(&dns.SRV{
			Hdr:      dns.RR_Header{Name: z.abs(s.Name), Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: ttl},
			Priority: s.Priority, Weight: s.Weight, Port: s.Port,
			Target: z.abs(s.Target),
		})
	}
	return z
}

func (z *zone) add(rr dns.RR) {
	name := strings.ToLower(rr.Header().Name)
	z.records[name] = append(z.records[name], rr)
}

// abs makes a zone-file name absolute: relative names are under the
// domain; "." and names with a trailing dot stay as they are.
func (z *zone) abs(name string) string {
	if name == "" || name == "@" {
		return z.domain
	}
	if strings.HasSuffix(name, ".") {
		return strings.ToLower(name)
	}
	return strings.ToLower(name) + "." + z.domain
}

// inZone reports whether name (a lowercase FQDN) is the domain or under
// it.
func (z *zone) inZone(name string) bool {
	return name == z.domain || strings.HasSuffix(name, "."+z.domain)
}

// lookup answers one question: the records of type qtype at name, and
// whether name exists at all. Additional A records go with SRV answers
// for their targets.
func (z *zone) lookup(name string, qtype uint16) (answer, extra []dns.RR, exists bool) {
	rrs, exists := z.records[name]
	for _, rr := range rrs {
		if qtype == dns.TypeANY || rr.Header().Rrtype == qtype {
			answer = append(answer, rr)
		}
	}
	for _, rr := range answer {
		if s, ok := rr.(*dns.SRV); ok {
			for _, a := range z.records[strings.ToLower(s.Target)] {
				if a.Header().Rrtype == dns.TypeA {
					extra = append(extra, a)
				}
			}
		}
	}
	return answer, extra, exists
}
