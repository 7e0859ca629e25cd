package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"go.etcd.io/etcd/api/v3/version"
	"go.etcd.io/etcd/server/v3/etcdmain"
)

// The init is also etcd. It links upstream etcd's own entry point
// (etcdmain.Main, which is all that `go build go.etcd.io/etcd/server/v3`
// compiles into its main), and when it is started under the name etcd it
// runs that and nothing of its own. The image builder installs
// /usr/bin/etcd as a link to /init unless it is given a separate etcd
// binary (another etcd version), so an image carries one Go program where
// it carried two that shared the standard library, gRPC, protobuf, zap and
// etcd's API and client: 28.1 MB where /init and etcd were 21.2 and 24.8
// MB, and an initrd of 12.3 MiB where it was 14.5 (DESIGN §1, §3). The
// etcd that runs is the version go.mod pins, and `etcd --version` says so.
// etcd still runs as a child process, never in the init's: only a process
// started as etcd runs it.
//
// Both processes run every package's initialisation: etcd runs the
// init's (small, nothing started), and the init runs etcd's (metric
// registrations, about 0.2 MB of allocations and 1 ms at start).

// carriesEtcd is the mark the image builder looks for in an init binary
// (image.checkCarriesEtcd) before it links /usr/bin/etcd to it. It is
// printed in the usage, which keeps it in the binary. Change both
// together.
const carriesEtcd = "etcdbox/init carries etcd"

// runAsEtcd runs etcd and reports true when the program was started as
// etcd (its argv[0]'s base name is "etcd").
func runAsEtcd(args []string) bool {
	if len(args) == 0 || filepath.Base(args[0]) != "etcd" {
		return false
	}
	etcdmain.Main(args)
	return true
}

// usage prints the init's flags and says how to reach its etcd.
func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprintf(out, "Usage of %s (%s: started as etcd, it is etcd %s):\n", filepath.Base(os.Args[0]), carriesEtcd, version.Version)
	flag.PrintDefaults()
}
