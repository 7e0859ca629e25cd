// Package seed is a node's configuration: the seed, a YAML document
// (DESIGN §4) that Parse reads strictly. Every unknown key and malformed
// value is reported at once, each naming its key path and the kind of
// problem, never a secret value.
//
//	data, ok, err := seed.FromCmdline(cmdline) // etcdbox.seed=<base64>
//	s, err := seed.Parse(data)
//
// The files hold one concern each: the schema, its defaults and Parse
// (seed.go), the error reports, the shape checks and their suggestions
// (problems.go), the checks of each section (validate.go), the size bound every source obeys
// (size.go), the kernel command line and the seed it may carry
// (cmdline.go), the seed section of a CA that issues node certificates
// (pki.go), and a static peer's URLs (peer.go).
//
// Seeds come from the first source that has one: the kernel command line,
// a NoCloud cidata volume, or a file baked into the initramfs (the init
// reads the volumes).
//
// The PID-1 init links this package, so it depends on little beyond the
// standard library: sigs.k8s.io/yaml, go-multierror and package pki.
package seed
