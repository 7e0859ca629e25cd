package seed

import (
	"net"
	"strconv"
)

// PeerURL is the URL etcd members use to reach p: https://host:peerPort.
func (p Peer) PeerURL() string {
	return "https://" + net.JoinHostPort(p.Host, strconv.Itoa(p.PeerPort))
}

// ClientURL is the URL clients use to reach p: https://host:clientPort.
func (p Peer) ClientURL() string {
	return "https://" + net.JoinHostPort(p.Host, strconv.Itoa(p.ClientPort))
}

// HTTPPortOf returns the etcd HTTP port of the member named name: its
// static peer entry's, or else the seed's etcd.httpPort (its default
// when unset). Members found by DNS SRV use the seed's.
func (s *Seed) HTTPPortOf(name string) int {
	for _, p := range s.Discovery.Peers {
		if p.Name == name && p.HTTPPort != 0 {
			return p.HTTPPort
		}
	}
	return or(s.Etcd.HTTPPort, DefaultHTTPPort)
}
