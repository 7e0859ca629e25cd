package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// imageFiles reads the regular files and symlinks of an image's
// filesystem.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		assert.Equal(t, time.Unix(testEpoch, 0).UTC(), hdr.ModTime.UTC(), "mtime of %s", hdr.Name)
		assert.Zero(t, hdr.Uid+hdr.Gid, "owner of %s", hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeReg:
			files["/"+hdr.Name], err = io.ReadAll(tr)
			require.NoError(t, err)
		case tar.TypeSymlink:
			files["/"+hdr.Name] = []byte("-> " + hdr.Linkname)
		}
	}
}

// checkImage checks the config and content of an OCI image of testConfig.
func checkImage(t *testing.T, img v1.Image) {
	t.Helper()
	require.NoError(t, validate.Image(img), "validate image")
	mt, err := img.MediaType()
	require.NoError(t, err)
	assert.Equal(t, types.OCIManifestSchema1, mt)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"/init"}, cf.Config.Entrypoint)
	assert.Equal(t, "amd64", cf.Architecture)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, int64(testEpoch), cf.Created.Unix(), "created")
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 2, "the container root, then the boot files")
	// The boot layer is a stored gzip: about the size of its files, so
	// a node inflates nothing; the root layer is compressed.
	bootSize, err := layers[1].Size()
	require.NoError(t, err)
	rootSize, err := layers[0].Size()
	require.NoError(t, err)
	bootRaw, err := layers[1].Uncompressed()
	require.NoError(t, err)
	bootTar, err := io.Copy(io.Discard, bootRaw)
	require.NoError(t, err)
	bootRaw.Close()
	assert.GreaterOrEqual(t, bootSize, bootTar, "the boot layer is compressed")
	rootRaw, err := layers[0].Uncompressed()
	require.NoError(t, err)
	rootTar, err := io.Copy(io.Discard, rootRaw)
	require.NoError(t, err)
	rootRaw.Close()
	assert.Less(t, rootSize, rootTar*4/5, "the root layer is not compressed")
	bootFiles := imageFiles(t, mustLayerImage(t, layers[1]))
	assert.ElementsMatch(t, []string{"/boot/vmlinuz", "/boot/initrd", "/boot/cmdline"}, slices.Collect(maps.Keys(bootFiles)), "the boot layer's files")

	cfg := testConfig(t)
	files := imageFiles(t, img)
	assert.Equal(t, "-> ../../init", string(files["/usr/bin/etcd"]), "/usr/bin/etcd links to the init, which carries etcd")
	for p, src := range map[string]string{"/boot/vmlinuz": cfg.Kernel, "/init": cfg.Init} {
		want, err := os.ReadFile(src)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, files[p]), "%s (%d bytes) differs from %s (%d bytes)", p, len(files[p]), src, len(want))
	}
	assert.True(t, bytes.Equal(initrdBytes(t), files["/boot/initrd"]), "/boot/initrd differs from the initrd")
	assert.Equal(t, cfg.Cmdline+"\n", string(files["/boot/cmdline"]), "/boot/cmdline carries the image's extras")
	assert.Contains(t, files, "/usr/sbin/mke2fs")
	assert.Contains(t, files, "/etc/etcdbox/release")
}

func TestOCILayout(t *testing.T) {
	t.Parallel()
	dir, res := ociLayout(t)
	require.True(t, strings.HasPrefix(res.Digest, "sha256:"), "digest %q", res.Digest)
	lp, err := layout.FromPath(dir)
	require.NoError(t, err)
	idx, err := lp.ImageIndex()
	require.NoError(t, err)
	man, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, man.Manifests, 1)
	assert.Equal(t, res.Digest, man.Manifests[0].Digest.String())
	assert.Equal(t, "etcdbox:test", "etcdbox:"+man.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	img, err := lp.Image(man.Manifests[0].Digest)
	require.NoError(t, err)
	checkImage(t, img)
}

// TestOCIPushPull pushes to go-containerregistry's registry on loopback
// and pulls the image back; a tarball written by the same build and the
// layout written by another carry the same digest.
func TestOCIPushPull(t *testing.T) {
	t.Parallel()
	_, layoutRes := ociLayout(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/etcdbox/node:test"

	cfg := testConfig(t)
	cfg.Format, cfg.Push = FormatOCI, ref
	cfg.Output = filepath.Join(t.TempDir(), "etcdbox.tar")
	res, err := Build(context.Background(), cfg)
	require.NoError(t, err)
	assert.Equal(t, layoutRes.Digest, res.Digest, "two OCI builds of the same inputs differ")

	r, err := name.ParseReference(ref)
	require.NoError(t, err)
	pulled, err := remote.Image(r)
	require.NoError(t, err)
	d, err := pulled.Digest()
	require.NoError(t, err)
	assert.Equal(t, res.Digest, d.String(), "digest pulled back")
	checkImage(t, pulled)

	// A tarball (docker save format) keeps no manifest, only the config
	// and layers; those are the same.
	tag, err := name.NewTag(ref)
	require.NoError(t, err)
	fromTar, err := tarball.ImageFromPath(cfg.Output, &tag)
	require.NoError(t, err)
	assert.Equal(t, mustDigests(t, pulled), mustDigests(t, fromTar), "config and layer digests of the tarball image")
}

// mustLayerImage is an image of layer alone.
func mustLayerImage(t *testing.T, layer v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layer)
	require.NoError(t, err)
	return img
}

// mustDigests returns the config digest and the layer digests of img.
func mustDigests(t *testing.T, img v1.Image) []string {
	t.Helper()
	c, err := img.ConfigName()
	require.NoError(t, err)
	out := []string{c.String()}
	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		d, err := l.Digest()
		require.NoError(t, err)
		out = append(out, d.String())
	}
	return out
}

// TestOCIReproducible builds two tarballs and compares their bytes.
func TestOCIReproducible(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds two OCI images; runs without -short")
	}
	var outs []string
	for i := 0; i < 2; i++ {
		cfg := testConfig(t)
		cfg.Format, cfg.Output = FormatOCI, filepath.Join(t.TempDir(), "etcdbox.tar")
		_, err := Build(context.Background(), cfg)
		require.NoError(t, err)
		outs = append(outs, cfg.Output)
	}
	assert.Equal(t, contentDigest(t, outs[0]), contentDigest(t, outs[1]), "two OCI tarballs of the same inputs differ")
}

func TestCmdlineFile(t *testing.T) {
	for in, want := range map[string]string{
		"":                           "",
		"  \t ":                      "",
		"etcdbox.debug=1":            "etcdbox.debug=1\n",
		" rdinit=/x   quiet\tfoo=1 ": "rdinit=/x quiet foo=1\n",
	} {
		assert.Equal(t, want, string(cmdlineFile(in)), "%q", in)
	}
}
