package pki

import (
	"net"
	"strings"
)

// NodeSANs returns the subject alternative names of a node's server and peer
// certificate: DNS names name, name.<domain> for each domain, and localhost;
// IPs ips plus 127.0.0.1 and ::1. Duplicates and empty entries are dropped,
// DNS names are lowercased, and IPv4 addresses take their 4-byte form.
func NodeSANs(name string, domains []string, ips []net.IP) ([]string, []net.IP) {
	var dns []string
	seen := map[string]bool{}
	addDNS := func(s string) {
		s = strings.ToLower(strings.TrimSuffix(s, "."))
		if s == "" || seen[s] {
			return
		}
		seen[s] = true
		dns = append(dns, s)
	}
	name = strings.TrimSuffix(name, ".")
	addDNS(name)
	if name != "" {
		for _, d := range domains {
			d = strings.Trim(d, ".")
			if d != "" {
				addDNS(name + "." + d)
			}
		}
	}
	addDNS("localhost")

	var out []net.IP
	addIP := func(ip net.IP) {
		if ip4 := ip.To4(); ip4 != nil {
			ip = ip4
		}
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return
		}
		for _, o := range out {
			if o.Equal(ip) {
				return
			}
		}
		out = append(out, ip)
	}
	for _, ip := range ips {
		addIP(ip)
	}
	addIP(net.IPv4(127, 0, 0, 1))
	addIP(net.IPv6loopback)
	return dns, out
}
