package imagesig

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testRegistry serves go-containerregistry's registry on loopback.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return u.Host
}

// pushRandom pushes a random image to host/repo and returns its digest.
func pushRandom(t *testing.T, host, repo string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	require.NoError(t, err)
	tag, err := name.NewTag(host+"/"+repo+":v1", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(tag, img))
	h, err := img.Digest()
	require.NoError(t, err)
	d, err := name.NewDigest(host+"/"+repo+"@"+h.String(), name.Insecure)
	require.NoError(t, err)
	return d
}

func newKey(t *testing.T) (crypto.Signer, crypto.PublicKey, string) {
	t.Helper()
	priv, pub, err := GenerateKey()
	require.NoError(t, err)
	k, err := ParsePrivateKey(priv)
	require.NoError(t, err)
	p, err := ParsePublicKey(string(pub))
	require.NoError(t, err)
	return k, p, string(pub)
}

func signatures(t *testing.T, d name.Digest) int {
	t.Helper()
	img, err := remote.Image(Tag(d))
	require.NoError(t, err)
	m, err := img.Manifest()
	require.NoError(t, err)
	return len(m.Layers)
}

func TestSignAndVerify(t *testing.T) {
	host := testRegistry(t)
	ctx := t.Context()
	d := pushRandom(t, host, "etcdbox")
	a, aPub, _ := newKey(t)
	b, bPub, _ := newKey(t)
	_, edPriv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)

	_, err = Verify(ctx, d, []crypto.PublicKey{aPub})
	require.ErrorIs(t, err, ErrUnsigned)
	assert.Contains(t, err.Error(), "no signature at "+Tag(d).String())

	require.NoError(t, Sign(ctx, d, a))
	i, err := Verify(ctx, d, []crypto.PublicKey{aPub})
	require.NoError(t, err)
	assert.Equal(t, 0, i)
	i, err = Verify(ctx, d, []crypto.PublicKey{bPub, aPub})
	require.NoError(t, err)
	assert.Equal(t, 1, i, "the second trusted key signed it")
	_, err = Verify(ctx, d, []crypto.PublicKey{bPub})
	require.ErrorIs(t, err, ErrUntrusted)
	assert.Contains(t, err.Error(), "a signature by a key that is not trusted")

	// Signing again with the same key adds nothing; a second key signs
	// beside the first (a key rotation), and Ed25519 works too.
	require.NoError(t, Sign(ctx, d, a))
	assert.Equal(t, 1, signatures(t, d))
	require.NoError(t, Sign(ctx, d, b))
	require.NoError(t, Sign(ctx, d, edPriv))
	assert.Equal(t, 3, signatures(t, d))
	for _, k := range []crypto.PublicKey{aPub, bPub, edPriv.Public()} {
		_, err := Verify(ctx, d, []crypto.PublicKey{k})
		assert.NoError(t, err)
	}
}

func TestVerifyRefusesForeignAndTamperedSignatures(t *testing.T) {
	host := testRegistry(t)
	ctx := t.Context()
	a, aPub, _ := newKey(t)
	good := pushRandom(t, host, "etcdbox")
	other := pushRandom(t, host, "other")
	require.NoError(t, Sign(ctx, other, a))

	// The other image's signature copied to this image's tag: signed by
	// a trusted key, but for another digest.
	sigs, err := remote.Image(Tag(other))
	require.NoError(t, err)
	require.NoError(t, remote.Write(Tag(good), sigs))
	_, err = Verify(ctx, good, []crypto.PublicKey{aPub})
	require.ErrorIs(t, err, ErrUntrusted)
	assert.Contains(t, err.Error(), `a signature for "`+other.DigestStr()+`"`)

	// A payload changed after signing, its signature kept.
	p, err := Payload(good)
	require.NoError(t, err)
	sig, err := SignPayload(a, p)
	require.NoError(t, err)
	tampered := []byte(strings.Replace(string(p), `"optional":null`, `"optional":{"x":"y"}`, 1))
	require.NotEqual(t, p, tampered)
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:       static.NewLayer(tampered, PayloadMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	require.NoError(t, err)
	require.NoError(t, remote.Write(Tag(good), img))
	_, err = Verify(ctx, good, []crypto.PublicKey{aPub})
	require.ErrorIs(t, err, ErrUntrusted)

	_, err = Verify(ctx, good, nil)
	assert.ErrorContains(t, err, "no trusted key")
}

func TestParseKeys(t *testing.T) {
	_, _, pub := newKey(t)
	_, err := ParsePublicKey(pub)
	require.NoError(t, err)
	for _, tt := range []struct{ name, pem, want string }{
		{"not PEM", "cosign.pub", "no PEM block"},
		{"two keys", pub + pub, "one key per entry"},
		{"a private key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", `a "PRIVATE KEY" block: want a PUBLIC KEY`},
	} {
		_, err := ParsePublicKey(tt.pem)
		assert.ErrorContains(t, err, tt.want, tt.name)
	}
	_, err = ParsePrivateKey([]byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"))
	assert.ErrorContains(t, err, "unencrypted PKCS#8 keys only")
	_, err = ParsePrivateKey([]byte(pub))
	assert.ErrorContains(t, err, "want a PRIVATE KEY")
}
