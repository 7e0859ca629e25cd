package cluster

import (
	"bytes"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBlobStore pushes an image to a registry on the disk store and pulls
// it back whole; an upload that does not match its digest leaves no file.
func TestBlobStore(t *testing.T) {
	dir := t.TempDir()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(blobStore{dir})))
	t.Cleanup(s.Close)
	host := strings.TrimPrefix(s.URL, "http://")

	img, err := random.Image(4096, 2)
	require.NoError(t, err)
	ref, err := name.ParseReference(host+"/etcdbox:v1", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, remote.WithTransport(s.Client().Transport)))

	layers, err := img.Layers()
	require.NoError(t, err)
	for _, l := range layers {
		d, err := l.Digest()
		require.NoError(t, err)
		fi, err := os.Stat(filepath.Join(dir, d.Algorithm, d.Hex))
		require.NoError(t, err, "layer %s is a file of the store", d)
		size, err := l.Size()
		require.NoError(t, err)
		assert.Equal(t, size, fi.Size())
	}
	pulled, err := remote.Image(ref, remote.WithTransport(s.Client().Transport))
	require.NoError(t, err)
	want, err := img.Digest()
	require.NoError(t, err)
	got, err := pulled.Digest()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	pl, err := pulled.Layers()
	require.NoError(t, err)
	rc, err := pl[0].Compressed()
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, rc)
	require.NoError(t, err, "a layer read to its end matches its digest")
	require.NoError(t, rc.Close())

	// A monolithic upload whose body is not what its digest names.
	bad := "sha256:" + strings.Repeat("ab", 32)
	req, err := http.NewRequest(http.MethodPost, s.URL+"/v2/etcdbox/blobs/uploads/?digest="+bad, bytes.NewReader([]byte("not that")))
	require.NoError(t, err)
	resp, err := s.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.GreaterOrEqual(t, resp.StatusCode, 400, "the registry took a blob that does not match its digest")
	_, err = os.Stat(filepath.Join(dir, "sha256", strings.Repeat("ab", 32)))
	assert.ErrorIs(t, err, os.ErrNotExist)
	left, err := filepath.Glob(filepath.Join(dir, "sha256", ".upload-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "a failed upload leaves its temporary file")
}
