package upgrade

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// registryHost starts go-containerregistry's registry on loopback.
func registryHost(t *testing.T) string {
	s := httptest.NewServer(registry.New())
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func TestFetchBuiltImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an OCI image")
	}
	host := registryHost(t)
	vmlinuz, modules := testenv.Kernel(t)
	res, err := image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules, Etcd: testenv.Bin(t, "etcd"), Init: testenv.Bin(t, "init"),
		Format: image.FormatOCI, Push: host + "/etcdbox:v2", Compression: image.CompressionFast,
	})
	require.NoError(t, err)

	ref := host + "/etcdbox@" + res.Digest
	b, err := Fetch(context.Background(), ref, Options{Insecure: true})
	require.NoError(t, err)
	assert.Equal(t, res.Digest, b.Digest)
	want, err := os.ReadFile(vmlinuz)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, b.Kernel), "kernel bytes differ")
	assert.Greater(t, len(b.Initrd), 1<<20)
	assert.Equal(t, []byte{0x28, 0xb5, 0x2f, 0xfd}, b.Initrd[:4], "initrd is zstd")
	assert.Empty(t, b.Cmdline, "an image built without extras")
}

func pushLayer(t *testing.T, host string, files map[string]string) string {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for p, data := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(data))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	layer, err := tarball.LayerFromReader(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	return push(t, host, img)
}

// push pushes img, as a linux/amd64 image, and returns its digest
// reference.
func push(t *testing.T, host string, img v1.Image) string {
	return pushPlatform(t, host, img, "linux", "amd64")
}

func pushPlatform(t *testing.T, host string, img v1.Image, os, arch string) string {
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = os, arch
	img, err = mutate.ConfigFile(img, cf)
	require.NoError(t, err)
	ref, err := name.ParseReference(host+"/x:latest", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img))
	d, err := img.Digest()
	require.NoError(t, err)
	return host + "/x@" + d.String()
}

func TestFetchBadInput(t *testing.T) {
	host := registryHost(t)
	ok := pushLayer(t, host, map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i"})
	noKernel := pushLayer(t, host, map[string]string{"boot/initrd": "i"})
	noInitrd := pushLayer(t, host, map[string]string{"./boot/vmlinuz": "k"})
	twoLines := pushLayer(t, host, map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i", "boot/cmdline": "a=1\nb=2\n"})
	control := pushLayer(t, host, map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i", "boot/cmdline": "a=\x1b[2J\n"})
	huge := pushLayer(t, host, map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i", "boot/cmdline": strings.Repeat("x", maxCmdline+1)})
	tests := []struct {
		name, ref, want string
	}{
		{"tag instead of digest", host + "/x:latest", "pinned by digest"},
		{"garbage reference", "::nope::", "::nope::"},
		{"unknown digest", host + "/x@sha256:" + strings.Repeat("0", 64), "pull"},
		{"no kernel", noKernel, "no /boot/vmlinuz"},
		{"no initrd", noInitrd, "no /boot/initrd"},
		{"two-line cmdline", twoLines, "more than one line"},
		{"control characters in cmdline", control, "control characters"},
		{"huge cmdline", huge, "more than 4096"},
		{"unreachable registry", "127.0.0.1:1/x@sha256:" + strings.Repeat("a", 64), "127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Fetch(context.Background(), tt.ref, Options{Insecure: true})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	b, err := Fetch(context.Background(), ok, Options{Insecure: true})
	require.NoError(t, err)
	assert.Equal(t, "k", string(b.Kernel))
	assert.Equal(t, "i", string(b.Initrd))
	assert.Empty(t, b.Cmdline, "an image without /boot/cmdline (older builds)")

	withExtras := pushLayer(t, host, map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i", "boot/cmdline": "  rdinit=/x\tquiet \n"})
	b, err = Fetch(context.Background(), withExtras, Options{Insecure: true})
	require.NoError(t, err)
	assert.Equal(t, "rdinit=/x quiet", b.Cmdline)
}

// TestFetchCmdline checks that an image built with command-line extras
// hands them to the agent.
func TestFetchCmdline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an OCI image")
	}
	host := registryHost(t)
	vmlinuz, modules := testenv.Kernel(t)
	res, err := image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules, Etcd: testenv.Bin(t, "etcd"), Init: testenv.Bin(t, "init"),
		Format: image.FormatOCI, Push: host + "/etcdbox:v3", Cmdline: "rdinit=/nonexistent  etcdbox.debug=1",
		Compression: image.CompressionFast,
	})
	require.NoError(t, err)
	b, err := Fetch(context.Background(), host+"/etcdbox@"+res.Digest, Options{Insecure: true})
	require.NoError(t, err)
	assert.Equal(t, "rdinit=/nonexistent etcdbox.debug=1", b.Cmdline)
}

// tarBytes is a tar of files, in name order, followed by pad zero bytes.
func tarBytes(t *testing.T, files map[string]string, pad int) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: p, Mode: 0o644, Size: int64(len(files[p])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(files[p]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	buf.Write(make([]byte, pad))
	return buf.Bytes()
}

// TestFetchLayers checks the layer rules: a later layer's file wins, and
// the agent stops at the last layer when that holds every boot file, so
// the container root is never pulled.
func TestFetchLayers(t *testing.T) {
	var mu sync.Mutex
	fetched := map[string]bool{}
	reg := registry.New()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i := strings.Index(r.URL.Path, "/blobs/"); i >= 0 && r.Method == http.MethodGet {
			mu.Lock()
			fetched[r.URL.Path[i+len("/blobs/"):]] = true
			mu.Unlock()
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	host := strings.TrimPrefix(s.URL, "http://")

	root, err := tarball.LayerFromReader(bytes.NewReader(tarBytes(t, map[string]string{
		"boot/vmlinuz": "old kernel", "boot/initrd": "old initrd", "boot/cmdline": "old=1\n", "init": "x",
	}, 0)))
	require.NoError(t, err)
	boot := static.NewLayer(tarBytes(t, map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i", "boot/cmdline": "a=1\n"}, 0), types.OCIUncompressedLayer)
	img, err := mutate.AppendLayers(empty.Image, root, boot)
	require.NoError(t, err)
	b, err := Fetch(context.Background(), push(t, host, img), Options{Insecure: true})
	require.NoError(t, err)
	assert.Equal(t, "k", string(b.Kernel), "the last layer's kernel wins")
	assert.Equal(t, "i", string(b.Initrd))
	assert.Equal(t, "a=1", b.Cmdline)
	rootDigest, err := root.Digest()
	require.NoError(t, err)
	bootDigest, err := boot.Digest()
	require.NoError(t, err)
	mu.Lock()
	assert.True(t, fetched[bootDigest.String()], "the boot layer was pulled")
	assert.False(t, fetched[rootDigest.String()], "the container root was pulled, though the last layer holds every boot file")
	mu.Unlock()

	// A last layer with only a kernel: the initrd and command line come
	// from the layer before.
	partial := static.NewLayer(tarBytes(t, map[string]string{"boot/vmlinuz": "k2"}, 0), types.OCIUncompressedLayer)
	img, err = mutate.AppendLayers(empty.Image, root, partial)
	require.NoError(t, err)
	b, err = Fetch(context.Background(), push(t, host, img), Options{Insecure: true})
	require.NoError(t, err)
	assert.Equal(t, "k2", string(b.Kernel))
	assert.Equal(t, "old initrd", string(b.Initrd))
	assert.Equal(t, "old=1", b.Cmdline)
}

// TestFetchTamperedPadding serves a boot layer whose bytes after the tar's
// end differ from what its digest names: the pull fails, though every
// file the agent uses is intact.
func TestFetchTamperedPadding(t *testing.T) {
	layerBytes := tarBytes(t, map[string]string{"boot/vmlinuz": "k", "boot/initrd": "i", "boot/cmdline": "\n"}, 4096)
	layer := static.NewLayer(layerBytes, types.OCIUncompressedLayer)
	d, err := layer.Digest()
	require.NoError(t, err)
	reg := registry.New()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+d.String()) {
			reg.ServeHTTP(w, r)
			return
		}
		bad := slices.Clone(layerBytes)
		bad[len(bad)-1] = 'x'
		w.Header().Set("Content-Length", strconv.Itoa(len(bad)))
		_, _ = w.Write(bad)
	}))
	t.Cleanup(s.Close)
	host := strings.TrimPrefix(s.URL, "http://")
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	_, err = Fetch(context.Background(), push(t, host, img), Options{Insecure: true})
	require.Error(t, err, "a blob that does not match its digest was accepted")
	assert.Contains(t, err.Error(), "layer 0")
	t.Logf("error: %v", err)
}

// tamperRegistry is go-containerregistry's registry behind a middleware
// that serves the blob or manifest of a digest changed by a function.
type tamperRegistry struct {
	reg http.Handler
	mu  sync.Mutex
	fix map[string]func([]byte) []byte
}

func (tr *tamperRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tr.mu.Lock()
	var f func([]byte) []byte
	for d, fn := range tr.fix {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/"+d) {
			f = fn
		}
	}
	tr.mu.Unlock()
	if f == nil {
		tr.reg.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	tr.reg.ServeHTTP(rec, r)
	body := f(rec.Body.Bytes())
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

func (tr *tamperRegistry) tamper(d v1.Hash, f func([]byte) []byte) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.fix[d.String()] = f
}

// rawManifest is a manifest pushed as given.
type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.b, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// TestFetchRefusesTampering serves what a hostile registry or a man in the
// middle of a plain-HTTP one would, under a pinned digest: each is refused
// with an error that says what was wrong, and no boot files come back.
func TestFetchRefusesTampering(t *testing.T) {
	tr := &tamperRegistry{reg: registry.New(registry.Logger(log.New(io.Discard, "", 0))), fix: map[string]func([]byte) []byte{}}
	s := httptest.NewServer(tr)
	t.Cleanup(s.Close)
	host := strings.TrimPrefix(s.URL, "http://")

	// Each case gets its own image (a distinct kernel), so that its
	// tampering touches no other case's blobs.
	image := func(kernel string) (v1.Image, string) {
		boot := static.NewLayer(tarBytes(t, map[string]string{"boot/vmlinuz": kernel, "boot/initrd": "initrd", "boot/cmdline": "\n"}, 0), types.OCIUncompressedLayer)
		img, err := mutate.AppendLayers(empty.Image, boot)
		require.NoError(t, err)
		ref := push(t, host, img)
		d, err := name.NewDigest(ref)
		require.NoError(t, err)
		pulled, err := remote.Image(d)
		require.NoError(t, err)
		return pulled, ref
	}
	layerDigest := func(img v1.Image) v1.Hash {
		ls, err := img.Layers()
		require.NoError(t, err)
		d, err := ls[len(ls)-1].Digest()
		require.NoError(t, err)
		return d
	}

	tests := []struct {
		name string
		// setup returns the reference to pull.
		setup func(t *testing.T) string
		opts  Options
		want  string
	}{
		{"a same-size layer", func(t *testing.T) string {
			// The kernel's bytes, changed in place: the tar still parses.
			img, ref := image("k-same-size")
			tr.tamper(layerDigest(img), func(b []byte) []byte {
				return bytes.Replace(b, []byte("k-same-size"), []byte("k-evil-size"), 1)
			})
			return ref
		}, Options{}, "error verifying sha256 checksum"},
		{"a truncated layer", func(t *testing.T) string {
			img, ref := image("k-truncated")
			tr.tamper(layerDigest(img), func(b []byte) []byte { return b[:len(b)/2] })
			return ref
		}, Options{}, "layer 0"},
		{"an extra trailing byte", func(t *testing.T) string {
			img, ref := image("k-trailing")
			tr.tamper(layerDigest(img), func(b []byte) []byte { return append(slices.Clone(b), 0) })
			return ref
		}, Options{}, "layer 0"},
		{"another config", func(t *testing.T) string {
			img, ref := image("k-config")
			m, err := img.Manifest()
			require.NoError(t, err)
			tr.tamper(m.Config.Digest, func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"amd64"`, `"arm64"`, 1))
			})
			return ref
		}, Options{}, "config sha256:"},
		{"another platform, honestly", func(t *testing.T) string {
			boot := static.NewLayer(tarBytes(t, map[string]string{"boot/vmlinuz": "k-arm", "boot/initrd": "i", "boot/cmdline": "\n"}, 0), types.OCIUncompressedLayer)
			img, err := mutate.AppendLayers(empty.Image, boot)
			require.NoError(t, err)
			return pushPlatform(t, host, img, "linux", "arm64")
		}, Options{}, "platform linux/arm64, want linux/amd64"},
		{"a manifest list in place of a manifest", func(t *testing.T) string {
			img, _ := image("k-index")
			idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
			ir, err := name.ParseReference(host+"/x:index", name.Insecure)
			require.NoError(t, err)
			require.NoError(t, remote.WriteIndex(ir, idx))
			d, err := idx.Digest()
			require.NoError(t, err)
			return host + "/x@" + d.String()
		}, Options{}, "is an image index"},
		{"a huge layer", func(t *testing.T) string {
			img, _ := image("k-huge")
			m, err := img.Manifest()
			require.NoError(t, err)
			m = m.DeepCopy()
			m.Layers[0].Size = 3 << 30
			b, err := json.Marshal(m)
			require.NoError(t, err)
			r, err := name.ParseReference(host+"/x:huge", name.Insecure)
			require.NoError(t, err)
			require.NoError(t, remote.Put(r, rawManifest{b, types.OCIManifestSchema1}))
			return host + "/x@" + digestOf(t, b)
		}, Options{}, "layer 0 is 3221225472 bytes by its manifest: over the limit"},
		{"a gzip bomb", func(t *testing.T) string {
			var files = map[string]string{"boot/vmlinuz": "k-bomb", "boot/initrd": "i", "boot/cmdline": "\n", "zeros": strings.Repeat("\x00", 4<<20)}
			l, err := tarball.LayerFromReader(bytes.NewReader(tarBytes(t, files, 0)))
			require.NoError(t, err)
			img, err := mutate.AppendLayers(empty.Image, l)
			require.NoError(t, err)
			return push(t, host, img)
		}, Options{MaxUncompressed: 1 << 20}, "inflates to more than 1048576 bytes: over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := tt.setup(t)
			b, err := Fetch(context.Background(), ref, Options{Insecure: true, MaxLayer: tt.opts.MaxLayer, MaxUncompressed: tt.opts.MaxUncompressed})
			require.Error(t, err, "accepted")
			assert.Nil(t, b)
			assert.Contains(t, err.Error(), tt.want)
			t.Logf("refused: %v", err)
		})
	}
}

func digestOf(t *testing.T, b []byte) string {
	h, _, err := v1.SHA256(bytes.NewReader(b))
	require.NoError(t, err)
	return h.String()
}
