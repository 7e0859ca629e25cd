// Package discovery finds a node's peers from its seed's discovery
// section (package seed holds the seed itself): SRV resolves
// _etcd-server-ssl._tcp.<domain> (and the client records) into peers
// addressed by DNS name; StaticPeers takes the seed's list.
//
//	peers, err := discovery.SRV(ctx, net.DefaultResolver, "etcd.example.internal", "")
//	initial, err := peers.Initial(s.Discovery.InitialSize) // who may bootstrap
//	// err: an *IncompleteError while not every initial member is listed
//
// The PID-1 init links this package, so it depends on little beyond the
// standard library: package seed and the DNS resolver it is given.
package discovery
