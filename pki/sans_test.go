package pki

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNodeSANs(t *testing.T) {
	ip := net.ParseIP
	tests := []struct {
		name    string
		node    string
		domains []string
		ips     []net.IP
		wantDNS []string
		wantIPs []net.IP
	}{
		{
			name:    "name only",
			node:    "n1",
			wantDNS: []string{"n1", "localhost"},
			wantIPs: []net.IP{ip("127.0.0.1").To4(), ip("::1")},
		},
		{
			name:    "domains and addresses",
			node:    "n1",
			domains: []string{"example.internal", "dc1.example.internal."},
			ips:     []net.IP{ip("10.0.0.11"), ip("fd00::11")},
			wantDNS: []string{"n1", "n1.example.internal", "n1.dc1.example.internal", "localhost"},
			wantIPs: []net.IP{ip("10.0.0.11").To4(), ip("fd00::11"), ip("127.0.0.1").To4(), ip("::1")},
		},
		{
			name:    "duplicates and case",
			node:    "N1",
			domains: []string{"Example.Internal", "example.internal", ""},
			ips:     []net.IP{ip("10.0.0.11"), ip("10.0.0.11").To4(), ip("127.0.0.1"), nil},
			wantDNS: []string{"n1", "n1.example.internal", "localhost"},
			wantIPs: []net.IP{ip("10.0.0.11").To4(), ip("127.0.0.1").To4(), ip("::1")},
		},
		{
			name:    "no name",
			domains: []string{"example.internal"},
			wantDNS: []string{"localhost"},
			wantIPs: []net.IP{ip("127.0.0.1").To4(), ip("::1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dns, ips := NodeSANs(tt.node, tt.domains, tt.ips)
			assert.Equal(t, tt.wantDNS, dns, "NodeSANs(%q, %q) DNS", tt.node, tt.domains)
			assert.Equal(t, tt.wantIPs, ips, "NodeSANs(%q, %v) IPs", tt.node, tt.ips)
		})
	}
}
