// Package e2e boots real etcdbox images in QEMU (UEFI firmware,
// systemd-boot, the Debian kernel) and checks what an operator would:
// etcd serves over mutual TLS, keeps its data, restarts, and shuts down
// cleanly. One image is built per test binary and shared; each VM runs on
// its own copy-on-write overlay.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/seed"
	"github.com/stretchr/testify/require"
)

// Guest ports.
const (
	clientPort = 2379
	httpPort   = seed.DefaultHTTPPort // etcd's HTTP endpoints: /metrics, /health
	apiPort    = seed.DefaultAPIPort
	hookPort   = 9999
)

// bootDeadline bounds one boot to "etcd ready" under software emulation
// (about 10-20 s here; CI machines can be slower and busier).
const bootDeadline = 4 * time.Minute

var shared struct {
	once  sync.Once
	err   error
	dir   string // holds pki/ and the images
	image string
}

// fixture returns the shared PKI directory and the image, built once with
// the test-hook init and a seed carrying the shared CA.
func fixture(t *testing.T) (pkiDir, img string) {
	t.Helper()
	if testing.Short() {
		t.Skip("QEMU tier: runs in make test, not in go test -short")
	}
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "etcdbox-e2e-")
		if shared.err != nil {
			return
		}
		pkiDir := filepath.Join(shared.dir, "pki")
		if shared.err = pki.Init(pkiDir, false); shared.err != nil {
			return
		}
		seedFile, err := seedFor(pkiDir, "e2e", "")
		if err != nil {
			shared.err = err
			return
		}
		shared.image = filepath.Join(shared.dir, "etcdbox.img")
		shared.err = buildImage(t, shared.image, seedFile)
	})
	require.NoError(t, shared.err)
	return filepath.Join(shared.dir, "pki"), shared.image
}

// seedFor writes a seed for cluster, issued from the CA in pkiDir, and
// returns its path. extra is appended verbatim (for bad seeds).
func seedFor(pkiDir, cluster, extra string) (string, error) {
	// The smallest quota etcd is given, so that TestSingleNode can fill
	// it and see the NOSPACE alarm without writing much.
	s := &seed.Seed{Cluster: cluster, Name: "n1", Etcd: seed.Etcd{QuotaBackendBytes: seed.MinQuotaBackendBytes}}
	var err error
	if s.PKI, _, err = seed.IssuingPKIFrom(pkiDir, s.NodeScope()); err != nil {
		return "", err
	}
	data, err := s.Marshal()
	if err != nil {
		return "", err
	}
	data = append(data, []byte(extra)...)
	path := filepath.Join(pkiDir, "..", cluster+"-seed.yaml")
	return path, os.WriteFile(path, data, 0o600)
}

// buildImage builds a raw image with the test-hook init and seed baked in.
func buildImage(t *testing.T, out, seedFile string) error {
	vmlinuz, modules := testenv.Kernel(t)
	_, err := image.Build(context.Background(), image.Config{
		Kernel:     vmlinuz,
		Modules:    modules,
		Init:       testenv.Bin(t, "init-testhooks"), // and its own etcd
		Bootloader: testenv.Bootloader(t),
		Seed:       seedFile,
		// These VMs are on QEMU's user network, where nothing answers at
		// 169.254.169.254: the cloud probe before the baked seed would
		// only cost each boot a lease and a connect timeout. The
		// metadata path is TestCluster's (nodes n4, n5, and the recover
		// step's n1 and n2).
		Cmdline:  "etcdbox.metadata=off",
		Output:   out,
		Version:  "e2e",
		CacheDir: testenv.InitrdCache(t),
	})
	return err
}

// node is one VM under test and the directory that keeps its disk across
// boots.
type node struct {
	t   *testing.T
	dir string
	img string
	vm  *qemu.VM
	cfg qemu.Config
}

func newNode(t *testing.T, img string) *node {
	code, vars := testenv.OVMF(t)
	dir := t.TempDir()
	return &node{t: t, dir: dir, img: img, cfg: qemu.Config{
		Name:     "n1",
		Dir:      filepath.Join(dir, "vm"),
		Image:    img,
		Overlay:  true,
		OVMFCode: code,
		OVMFVars: vars,
		Forwards: []qemu.Forward{{GuestPort: clientPort}, {GuestPort: httpPort}, {GuestPort: apiPort}, {GuestPort: hookPort}},
	}}
}

// boot starts the VM (again, on the same disk) and returns the console
// offset it started from.
func (n *node) boot(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vm, err := qemu.Start(ctx, n.cfg)
	require.NoError(t, err)
	n.vm = vm
	n.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = vm.Stop(ctx, 10*time.Second)
		if n.t.Failed() {
			n.t.Logf("console of %s (last 60 lines):\n%s", vm.Name(), vm.ConsoleTail(60))
		}
	})
}

// wait waits for a console line holding want, after offset from; a fatal
// init error ends the wait early.
func (n *node) wait(t *testing.T, from int64, want string, within time.Duration) qemu.ConsoleMatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	m, err := n.vm.WaitConsole(ctx, from, want, "etcdbox: fatal:")
	require.NoError(t, err, "console tail:\n%s", n.vm.ConsoleTail(40))
	require.Equal(t, want, m.Text, "console: %s", m.Line)
	return m
}

// powerOff presses the power button and waits for the clean shutdown
// marker and QEMU's exit.
func (n *node) powerOff(t *testing.T, within time.Duration) {
	t.Helper()
	from := n.vm.Mark()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	require.NoError(t, n.vm.Powerdown(ctx))
	n.wait(t, from, "etcdbox: shutdown complete", within)
	require.NoError(t, n.vm.Wait(ctx), "qemu did not exit after the power-off")
}

func (n *node) endpoint() string {
	return fmt.Sprintf("https://127.0.0.1:%d", n.vm.HostPort(clientPort))
}

// httpEndpoint is the base URL of the node's etcd HTTP endpoints.
func (n *node) httpEndpoint() string {
	return fmt.Sprintf("https://127.0.0.1:%d", n.vm.HostPort(httpPort))
}

// api is a client of the node's API with the admin certificate of pkiDir,
// closed when the test ends.
func (n *node) api(t *testing.T, pkiDir string) *nodeapi.Client {
	t.Helper()
	c, err := nodeapi.NewClient(fmt.Sprintf("https://127.0.0.1:%d", n.vm.HostPort(apiPort)), pkiDir)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
