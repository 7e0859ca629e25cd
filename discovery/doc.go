// Package discovery gives a node its configuration and its peers.
//
// A node's configuration is its seed, a YAML document (DESIGN §4) that
// ParseSeed reads strictly: every unknown key and malformed value is
// reported at once, each naming its key path.
//
//	data, ok, err := discovery.SeedFromCmdline(cmdline) // etcdbox.seed=<base64>
//	seed, err := discovery.ParseSeed(data)
//
// Seeds come from the first source that has one: the kernel command line
// (ParseCmdline, SeedFromCmdline), a NoCloud cidata volume, or a file baked
// into the initramfs (the init reads the volumes; config drives and cloud
// metadata services come later).
//
// The peer set comes from the seed's discovery section: SRV resolves
// _etcd-server-ssl._tcp.<domain> (and the client records) into peers
// addressed by DNS name; StaticPeers takes the seed's list.
//
//	peers, err := discovery.SRV(ctx, net.DefaultResolver, "etcd.example.internal", "")
//	initial, err := peers.Initial(seed.Discovery.InitialSize) // who may bootstrap
//	// err: an *IncompleteError while not every initial member is listed
//
// The PID-1 init links this package, so it depends on little beyond the
// standard library: sigs.k8s.io/yaml, go-multierror and package pki.
package discovery
