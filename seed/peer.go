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
