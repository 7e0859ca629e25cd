package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// The cluster's registry: the network daemon serves one in-memory OCI
// registry (go-containerregistry's registry.New) on two listeners with
// the same handler: on the gateway inside the closed network, where the
// guests pull upgrade images from (RegistryPort; the seed lists it as an
// insecure registry), and on a host loopback port, written to
// D/net/RegistryFile, where the CLI and tests push. Images live as long
// as the daemon: its manifests in its memory, their blobs in
// D/net/RegistryBlobDir (blobs.go), which a new daemon empties.
const (
	RegistryPort = 5000
	RegistryFile = "registry.addr"
	// RegistryRepo is the repository images are pushed to.
	RegistryRepo = "etcdbox"
)

// GuestRegistry is the registry's address as the guests reach it.
func GuestRegistry() string {
	gw := netip.MustParsePrefix(vnet.DefaultSubnet).Addr().Next()
	return net.JoinHostPort(gw.String(), strconv.Itoa(RegistryPort))
}

// serveRegistry serves the registry on n's gateway and on a loopback port
// whose address it writes to dir/RegistryFile.
func serveRegistry(n *vnet.Network, dir string, logf func(string, ...any)) error {
	blobs := filepath.Join(dir, RegistryBlobDir)
	if err := os.RemoveAll(blobs); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(blobStore{blobs}))
	gl, err := n.Listen(RegistryPort)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		return fmt.Errorf("registry: %w", err)
	}
	if err := pki.WriteFileAtomic(filepath.Join(dir, RegistryFile), []byte(hl.Addr().String()+"\n"), 0o644); err != nil {
		gl.Close()
		hl.Close()
		return fmt.Errorf("registry: %w", err)
	}
	for _, l := range []net.Listener{gl, hl} {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
		go srv.Serve(l)
	}
	logf("registry: guests pull from %s:%d, the host pushes to %s", n.Gateway(), RegistryPort, hl.Addr())
	return nil
}

// RegistryAddr returns the host loopback address (127.0.0.1:port) of the
// cluster's registry.
func (c *Cluster) RegistryAddr() (string, error) { return RegistryAddr(c.cfg.Dir) }

// RegistryAddr returns the host loopback address of the registry of the
// cluster in dir.
func RegistryAddr(dir string) (string, error) {
	p := filepath.Join(dir, NetDir, RegistryFile)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("the network daemon serves no registry (%s missing); bring the cluster down and up again", p)
		}
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Push pushes img to the cluster's registry and returns its reference as
// the guests reach it, pinned by digest:
// 10.88.0.1:5000/etcdbox@sha256:...
func (c *Cluster) Push(ctx context.Context, img v1.Image) (string, error) {
	addr, err := c.RegistryAddr()
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(addr+"/"+RegistryRepo+"@"+d.String(), name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push to the cluster registry %s: %w", addr, err)
	}
	return GuestRegistry() + "/" + RegistryRepo + "@" + d.String(), nil
}
