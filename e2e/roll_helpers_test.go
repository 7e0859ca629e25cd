package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

// The images, registry pushes, signatures and rolls of the upgrade tests.

// rollDeadline bounds a roll of three nodes under software emulation: per
// node a pull, a reboot (20-40 s), the gate's settle time, and slack.
const rollDeadline = 20 * time.Minute

// buildInit builds the test-hook init from this tree, so the images carry
// the node API this test drives (snapshot, last rollback) whatever
// bin/init-testhooks holds.
func buildInit(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "init")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", "testhooks", "-o", out, "./init")
	cmd.Dir = testenv.Root(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./init: %s", b)
	return out
}

// buildRollImage builds an image of version with etcdBin as /usr/bin/etcd
// ("": the init's own etcd), raw
// at out (.img) or an OCI tarball (.tar).
func buildRollImage(t *testing.T, initBin, etcdBin, version, out string) {
	t.Helper()
	buildImageCmdline(t, initBin, etcdBin, version, "", out)
}

// buildImageCmdline is buildRollImage with more kernel command-line
// arguments.
func buildImageCmdline(t *testing.T, initBin, etcdBin, version, cmdline, out string) {
	t.Helper()
	require.NoError(t, buildImages(t, rollImage{initBin, etcdBin, version, cmdline, out, ""}))
}

// A rollImage is one image for buildImages: as buildImageCmdline's
// arguments, with the initrd's compression ("" for the default).
type rollImage struct {
	initBin, etcdBin, version, cmdline, out string
	compression                             image.Compression
}

// buildImages builds imgs at once, two at a time (the compressor uses one
// core, and the machine has two), and returns their errors joined.
func buildImages(t *testing.T, imgs ...rollImage) error {
	t.Helper()
	vmlinuz, modules := testenv.Kernel(t)
	bootloader := testenv.Bootloader(t)
	errs := make([]error, len(imgs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, im := range imgs {
		cfg := image.Config{Kernel: vmlinuz, Modules: modules, Etcd: im.etcdBin, Init: im.initBin, Output: im.out,
			Version: im.version, Cmdline: im.cmdline, Compression: im.compression, CacheDir: testenv.InitrdCache(t)}
		if filepath.Ext(im.out) == ".tar" {
			cfg.Format = image.FormatOCI
		} else {
			cfg.Bootloader = bootloader
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := image.Build(context.Background(), cfg); err != nil {
				errs[i] = fmt.Errorf("build %s: %w", im.out, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pushImage pushes the OCI tarball to the cluster's registry and returns
// the guests' reference.
func pushImage(t *testing.T, c *cluster.Cluster, path string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(path, nil)
	require.NoError(t, err)
	ref, err := c.Push(t.Context(), img)
	require.NoError(t, err)
	return ref
}

// newRoll returns a roll of ref over every node of c.
func newRoll(t *testing.T, c *cluster.Cluster, ref string) *rollout.Roll {
	t.Helper()
	tc, err := c.TLS()
	require.NoError(t, err)
	var nodes []rollout.Node
	var eps []string
	for _, n := range c.Nodes() {
		api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.APIPort), c.PKIDir())
		require.NoError(t, err)
		t.Cleanup(api.Close)
		nodes = append(nodes, rollout.Node{Name: n.Name, API: api, EtcdEndpoint: n.Endpoint()})
		eps = append(eps, n.Endpoint())
	}
	cli, err := rollout.Dial(eps, tc)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return &rollout.Roll{Image: ref, Nodes: nodes, Etcd: rollout.NewEtcd(cli, tc), By: "e2e", Log: t.Logf, ReadyWait: 3 * time.Minute}
}

// signingKey makes a signing key pair and returns the signer and the
// public key's PEM.
func signingKey(t *testing.T) (crypto.Signer, string) {
	t.Helper()
	priv, pub, err := imagesig.GenerateKey()
	require.NoError(t, err)
	k, err := imagesig.ParsePrivateKey(priv)
	require.NoError(t, err)
	return k, string(pub)
}

// pushSigned pushes the OCI tarball at path to the cluster's registry,
// signs it with key, and returns the guests' reference.
func pushSigned(t *testing.T, c *cluster.Cluster, path string, key crypto.Signer) string {
	t.Helper()
	ref := pushImage(t, c, path)
	signRef(t, c, ref, key)
	return ref
}

// signRef signs the image the guests know as ref (on the cluster's
// registry, which this process reaches on its loopback address).
func signRef(t *testing.T, c *cluster.Cluster, ref string, key crypto.Signer) {
	t.Helper()
	addr, err := c.RegistryAddr()
	require.NoError(t, err)
	d, err := name.NewDigest(strings.Replace(ref, cluster.GuestRegistry(), addr, 1), name.Insecure)
	require.NoError(t, err)
	require.NoError(t, imagesig.Sign(t.Context(), d, key))
}

// nodeSlots is every node's slots as its node API reports them.
func nodeSlots(t *testing.T, c *cluster.Cluster) map[string][]nodeapi.Slot {
	t.Helper()
	out := map[string][]nodeapi.Slot{}
	for _, n := range c.Nodes() {
		st, err := nodeAPI(t, c, n).Status(t.Context())
		require.NoError(t, err)
		out[n.Name] = st.Slots
	}
	return out
}

// consoleMarks is every node's console offset now, to read what comes
// after it.
func consoleMarks(t *testing.T, c *cluster.Cluster) map[string]int64 {
	t.Helper()
	marks := map[string]int64{}
	for _, n := range c.Nodes() {
		vm, err := c.VM(n.Name)
		require.NoError(t, err)
		marks[n.Name] = vm.Mark()
	}
	return marks
}

// tamperBootLayer changes one byte of the kernel in the boot layer of ref
// where the cluster registry keeps it, as someone who controls the
// registry's storage (or the plain-HTTP path to it) would: the layer keeps
// its size and stays a well-formed gzip tar, and the manifest, its
// signatures and every other blob are untouched. Only the layer's digest,
// checked to the last byte, tells. It returns the layer's digest.
func tamperBootLayer(t *testing.T, c *cluster.Cluster, ref string) v1.Hash {
	t.Helper()
	addr, err := c.RegistryAddr()
	require.NoError(t, err)
	d, err := name.NewDigest(strings.Replace(ref, cluster.GuestRegistry(), addr, 1), name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(d, remote.WithContext(t.Context()))
	require.NoError(t, err)
	layers, err := img.Layers()
	require.NoError(t, err)
	h, err := layers[len(layers)-1].Digest()
	require.NoError(t, err)
	p := cluster.RegistryBlob(c.Dir(), h)
	blob, err := os.ReadFile(p)
	require.NoError(t, err, "the boot layer's blob")

	zr, err := gzip.NewReader(bytes.NewReader(blob))
	require.NoError(t, err)
	tarball, err := io.ReadAll(zr)
	require.NoError(t, err)
	off, size := tarEntry(t, tarball, "boot/vmlinuz")
	tarball[off+size/2] ^= 0xff

	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.NoCompression) // as image/oci.go writes the boot layer
	require.NoError(t, err)
	zw.Header = zr.Header
	_, err = zw.Write(tarball)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.Len(t, out.Bytes(), len(blob), "the tampered layer keeps its size")
	require.NoError(t, os.WriteFile(p, out.Bytes(), 0o644))
	return h
}

// tarEntry returns the offset and size of the content of the regular file
// name in the tar archive b, walking its 512-byte headers.
func tarEntry(t *testing.T, b []byte, name string) (int, int) {
	t.Helper()
	for off := 0; off+512 <= len(b); {
		hdr := b[off : off+512]
		n := string(bytes.TrimRight(hdr[:100], "\x00"))
		if n == "" {
			break
		}
		size, err := strconv.ParseInt(strings.TrimSpace(string(bytes.TrimRight(hdr[124:136], "\x00"))), 8, 64)
		require.NoError(t, err, "tar header of %q", n)
		if n == name && (hdr[156] == '0' || hdr[156] == 0) {
			return off + 512, int(size)
		}
		off += 512 + int((size+511)/512*512)
	}
	require.FailNow(t, "no "+name+" in the layer")
	return 0, 0
}
