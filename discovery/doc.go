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
// (ParseCmdline, SeedFromCmdline), a file baked into the initramfs, and
// later NoCloud and config drives and cloud metadata services. The package
// will also resolve the peer set from the seed: DNS SRV records or the
// static peer list.
//
// The PID-1 init links this package, so it depends on little beyond the
// standard library: sigs.k8s.io/yaml, go-multierror and package pki.
package discovery
