package main

import (
	"crypto"
	"io"
	"log"
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

	"github.com/etcdbox/etcdbox/imagesig"
)

// TestSign: pki signing-key makes a pair; sign resolves a tag to its
// digest, signs it, and the public key verifies the signature; a second
// signing-key does not replace the first; --sign without --push is a
// usage error.
func TestSign(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(128, 1)
	require.NoError(t, err)
	tag, err := name.NewTag(host+"/etcdbox:v2", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(tag, img))
	h, err := img.Digest()
	require.NoError(t, err)

	dir := filepath.Join(t.TempDir(), "pki")
	out, _, code, err := runExit(t, "pki", "signing-key", "--dir", dir)
	require.NoError(t, err)
	require.Equal(t, 0, code)
	assert.Equal(t, filepath.Join(dir, "signing.key")+"\n"+filepath.Join(dir, "signing.pub")+"\n", out)
	fi, err := os.Stat(filepath.Join(dir, "signing.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	_, _, code, err = runExit(t, "pki", "signing-key", "--dir", dir)
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Contains(t, err.Error(), "--force replaces it")

	out, _, code, err = runExit(t, "sign", host+"/etcdbox:v2", "--key", filepath.Join(dir, "signing.key"), "--insecure")
	require.NoError(t, err)
	require.Equal(t, 0, code)
	d, err := name.NewDigest(host+"/etcdbox@"+h.String(), name.Insecure)
	require.NoError(t, err)
	assert.Equal(t, "signed "+d.String()+" (signature at "+imagesig.Tag(d).String()+")\n", out)
	pub, err := os.ReadFile(filepath.Join(dir, "signing.pub"))
	require.NoError(t, err)
	k, err := imagesig.ParsePublicKey(string(pub))
	require.NoError(t, err)
	_, err = imagesig.Verify(t.Context(), d, []crypto.PublicKey{k})
	assert.NoError(t, err)

	_, _, code, err = runExit(t, "sign", host+"/etcdbox:v2", "--key", filepath.Join(dir, "signing.pub"))
	require.Error(t, err)
	assert.Equal(t, 1, code)
	assert.Contains(t, err.Error(), `a "PUBLIC KEY" block: want a PRIVATE KEY`)

	_, _, code, err = runExit(t, "build", "--sign", filepath.Join(dir, "signing.key"), "-o", filepath.Join(t.TempDir(), "x.img"))
	require.Error(t, err)
	assert.Equal(t, 2, code)
	assert.Contains(t, err.Error(), "--sign signs the pushed image: it needs --push")
}
