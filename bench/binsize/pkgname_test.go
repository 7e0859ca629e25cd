package main

import (
	"runtime/debug"
	"testing"
)

// TestSymbolPackage runs the parser on names as they come out of the
// symbol table and out of DWARF.
func TestSymbolPackage(t *testing.T) {
	for _, c := range []struct{ name, pkg string }{
		{"runtime.mallocgc", "runtime"},
		{"main.main", "main"},
		{"time.Time.appendFormat", "time"},
		{"crypto/tls.(*clientHelloMsg).marshalMsg", "crypto/tls"},
		{"github.com/vishvananda/netlink.(*Handle).prepareRouteReq", "github.com/vishvananda/netlink"},
		{"go.etcd.io/etcd/api/v3/v3rpc/rpctypes.init", "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"},
		{"go.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer).run.func3.1", "go.etcd.io/etcd/server/v3/etcdserver"},
		{"gopkg.in/natefinch/lumberjack%2ev2.(*Logger).Write", "gopkg.in/natefinch/lumberjack%2ev2"},
		{"crypto/internal/entropy/v1%2e0%2e0.SHA384", "crypto/internal/entropy/v1%2e0%2e0"},
		{"vendor/golang.org/x/crypto/chacha20poly1305.chacha20Poly1305Seal.abi0", "vendor/golang.org/x/crypto/chacha20poly1305"},
		{"slices.SortFunc[go.shape.[]uint8,go.shape.string]", "slices"},
		{"cmp..dict.Less[int]", "cmp"},
		{"google.golang.org/grpc/resolver.EndpointMap[go.shape.*uint8].Get", "google.golang.org/grpc/resolver"},
		{"github.com/a/b.Set[github.com/c/d.T].Add", "github.com/a/b"},
		{"go.etcd.io/etcd/client/v3.retryOption.google.golang.org/grpc.after", "go.etcd.io/etcd/client/v3"},
		{"go:itab.*os.File,io.Writer", "os"},
		{"go:itab.*github.com/etcdbox/etcdbox/init/console.Ring,io.Writer", "github.com/etcdbox/etcdbox/init/console"},
		{"type:.eq.[8]internal/cpu.option", "internal/cpu"},
		{"type:.eq.github.com/google/uuid.UUID", "github.com/google/uuid"},
		{"type:.gcmask.compress/flate.Writer", "compress/flate"},
		{"type:*", ""},
		{"go:func.*", ""},
		{"go:buildid", ""},
		{"go:string.*", ""},
		{"$f64.3ff0000000000000", ""},
		{"indexbytebody", ""},
		{"type:.eq.[2]string", ""},
		{"type:.eq.go.shape.struct { a int }", ""},
		// DWARF type names.
		{"*github.com/vishvananda/netlink.Handle", "github.com/vishvananda/netlink"},
		{"[]*go.etcd.io/bbolt.Bucket", "go.etcd.io/bbolt"},
		{"[5]log/slog.Attr", "log/slog"},
		{"map[string]*net/http.routingNode", "net/http"},
		{"map[uintptr]bool", ""},
		{"func(reflect.Value, reflect.Value) (bool, error)", "reflect"},
		{"func(...google.golang.org/grpc.DialOption) google.golang.org/grpc.DialOption", "google.golang.org/grpc"},
		{"chan chan *github.com/pierrec/lz4/v4/internal/lz4stream.FrameDataBlock", "github.com/pierrec/lz4/v4/internal/lz4stream"},
		{"noalg.[8]struct { key string; elem github.com/etcdbox/etcdbox/init/slot.Slot }", "github.com/etcdbox/etcdbox/init/slot"},
		{"noalg.map.group[string]int", ""},
		{"struct { Alias = go.opentelemetry.io/auto/sdk/internal/telemetry.Alias·2; Time uint64 }", "go.opentelemetry.io/auto/sdk/internal/telemetry"},
	} {
		if got := symbolPackage(c.name); got != c.pkg {
			t.Errorf("symbolPackage(%q) = %q, want %q", c.name, got, c.pkg)
		}
	}
}

// TestLookup maps packages to the modules of a made-up build info.
func TestLookup(t *testing.T) {
	m := newModules(&debug.BuildInfo{
		Main: debug.Module{Path: "github.com/etcdbox/etcdbox"},
		Deps: []*debug.Module{
			{Path: "go.etcd.io/etcd/client/v3"}, {Path: "go.etcd.io/etcd/client/pkg/v3"},
			{Path: "gopkg.in/natefinch/lumberjack.v2"}, {Path: "google.golang.org/grpc"},
		},
	})
	for _, c := range []struct{ name, pkg, mod string }{
		{"main.main", "main", "github.com/etcdbox/etcdbox"},
		{"github.com/etcdbox/etcdbox/init/slot.Read", "github.com/etcdbox/etcdbox/init/slot", "github.com/etcdbox/etcdbox"},
		{"go.etcd.io/etcd/client/pkg/v3/fileutil.Exist", "go.etcd.io/etcd/client/pkg/v3/fileutil", "go.etcd.io/etcd/client/pkg/v3"},
		{"go.etcd.io/etcd/client/v3.New", "go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/client/v3"},
		{"gopkg.in/natefinch/lumberjack%2ev2.(*Logger).Write", "gopkg.in/natefinch/lumberjack.v2", "gopkg.in/natefinch/lumberjack.v2"},
		{"*gopkg.in/natefinch/lumberjack.v2.Logger", "gopkg.in/natefinch/lumberjack.v2", "gopkg.in/natefinch/lumberjack.v2"},
		{"vendor/golang.org/x/net/idna.ToASCII", "vendor/golang.org/x/net/idna", stdModule},
		{"crypto/internal/entropy/v1%2e0%2e0.SHA384", "crypto/internal/entropy/v1.0.0", stdModule},
		{"github.com/other/thing.F", "github.com/other/thing", unknownMod},
		{"go:buildid", linkerModule, linkerModule},
		{"map[int]bool", noPackage, noPackage},
	} {
		pkg, mod := m.lookup(c.name)
		if pkg != c.pkg || mod != c.mod {
			t.Errorf("lookup(%q) = %q, %q; want %q, %q", c.name, pkg, mod, c.pkg, c.mod)
		}
	}
}
