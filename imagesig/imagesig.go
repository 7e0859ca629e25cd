// Package imagesig signs etcdbox images and checks their signatures, in
// the format cosign writes and checks with a key (`cosign sign --key`,
// `cosign verify --key`): a signature manifest beside the image, tagged
// sha256-<hex>.sig in the same repository, whose layers are each a
// "simple signing" JSON payload naming the image's manifest digest, with
// the signature of that payload in the layer's
// dev.cosignproject.cosign/signature annotation (base64; ECDSA over the
// payload's SHA-256, ASN.1, or Ed25519 over the payload).
//
// It needs only the standard library and go-containerregistry, which the
// init links already for its upgrade agent: sigstore's own libraries
// would bring the transparency log and Fulcio clients, which a node on a
// closed network cannot use. Keyless signatures and the transparency log
// are therefore out of scope; a key pair is what an operator of an
// appliance fleet keeps anyway.
package imagesig

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The cosign format's names.
const (
	PayloadMediaType    types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	SignatureAnnotation                 = "dev.cosignproject.cosign/signature"
	payloadType                         = "cosign container image signature"
)

// maxPayload bounds one payload read from a registry (cosign's are a few
// hundred bytes), and maxLayers the signatures of one image looked at.
const (
	maxPayload = 64 << 10
	maxLayers  = 64
)

// ErrUnsigned means the image has no signature at all.
var ErrUnsigned = errors.New("the image is not signed")

// ErrUntrusted means the image has signatures, but none that a trusted
// key made for this image.
var ErrUntrusted = errors.New("no signature by a trusted key")

// payload is cosign's simple signing payload.
type payload struct {
	Critical struct {
		Identity struct {
			DockerReference string `json:"docker-reference"`
		} `json:"identity"`
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
	Optional map[string]any `json:"optional"`
}

// Tag is where the signatures of the image d live.
func Tag(d name.Digest) name.Tag {
	return d.Context().Tag(strings.Replace(d.DigestStr(), ":", "-", 1) + ".sig")
}

// Payload is the simple signing payload for the image d.
func Payload(d name.Digest) ([]byte, error) {
	var p payload
	p.Critical.Identity.DockerReference = d.Context().Name()
	p.Critical.Image.DockerManifestDigest = d.DigestStr()
	p.Critical.Type = payloadType
	return json.Marshal(p)
}

// SignPayload signs a payload with key: ECDSA over its SHA-256 (ASN.1),
// or Ed25519 over the payload itself.
func SignPayload(key crypto.Signer, b []byte) ([]byte, error) {
	switch key.(type) {
	case ed25519.PrivateKey:
		return key.Sign(rand.Reader, b, crypto.Hash(0))
	case *ecdsa.PrivateKey:
		sum := sha256.Sum256(b)
		return key.Sign(rand.Reader, sum[:], crypto.SHA256)
	}
	return nil, fmt.Errorf("a %T key: want ECDSA or Ed25519", key)
}

// verifyPayload reports whether sig is key's signature of b.
func verifyPayload(key crypto.PublicKey, b, sig []byte) bool {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(b)
		return ecdsa.VerifyASN1(k, sum[:], sig)
	case ed25519.PublicKey:
		return ed25519.Verify(k, b, sig)
	}
	return false
}

// Sign signs the image d with key and pushes the signature to its
// repository, beside the signatures it has (a new key signs next to the
// old during a rotation); signing again with the same key adds nothing.
func Sign(ctx context.Context, d name.Digest, key crypto.Signer, opts ...remote.Option) error {
	b, err := Payload(d)
	if err != nil {
		return err
	}
	sig, err := SignPayload(key, b)
	if err != nil {
		return err
	}
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	tag := Tag(d)
	base, err := remote.Image(tag, opts...)
	switch {
	case isNotFound(err):
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	case err != nil:
		return fmt.Errorf("read the signatures at %s: %w", tag, err)
	default:
		if layers, err := signedLayers(base); err == nil {
			for _, l := range layers {
				if bytes.Equal(l.payload, b) && verifyPayload(key.Public(), b, l.sig) {
					return nil // this key signed this image already
				}
			}
		}
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       static.NewLayer(b, PayloadMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return err
	}
	if err := remote.Write(tag, img, opts...); err != nil {
		return fmt.Errorf("push the signature to %s: %w", tag, err)
	}
	return nil
}

// Verify checks that the image d is signed by one of keys and returns
// the index of the key that signed it. Every byte it reads is checked
// against the digests that lead to it.
func Verify(ctx context.Context, d name.Digest, keys []crypto.PublicKey, opts ...remote.Option) (int, error) {
	if len(keys) == 0 {
		return -1, errors.New("no trusted key to check the signature with")
	}
	tag := Tag(d)
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	img, err := remote.Image(tag, opts...)
	if isNotFound(err) {
		return -1, fmt.Errorf("%w: no signature at %s", ErrUnsigned, tag)
	}
	if err != nil {
		return -1, fmt.Errorf("read the signatures at %s: %w", tag, err)
	}
	layers, err := signedLayers(img)
	if err != nil {
		return -1, fmt.Errorf("the signatures at %s: %w", tag, err)
	}
	if len(layers) == 0 {
		return -1, fmt.Errorf("%w: %s holds no signature", ErrUnsigned, tag)
	}
	var other []string
	for _, l := range layers {
		var p payload
		if err := json.Unmarshal(l.payload, &p); err != nil {
			other = append(other, "a payload that is not JSON")
			continue
		}
		if p.Critical.Type != payloadType || p.Critical.Image.DockerManifestDigest != d.DigestStr() {
			other = append(other, fmt.Sprintf("a signature for %q", p.Critical.Image.DockerManifestDigest))
			continue
		}
		for i, k := range keys {
			if verifyPayload(k, l.payload, l.sig) {
				return i, nil
			}
		}
		other = append(other, "a signature by a key that is not trusted")
	}
	return -1, fmt.Errorf("%w: %s holds %s", ErrUntrusted, tag, strings.Join(other, ", "))
}

// signedLayer is one signature: its payload and its signature bytes.
type signedLayer struct {
	payload, sig []byte
}

// signedLayers reads the signature layers of a signature manifest.
func signedLayers(img v1.Image) ([]signedLayer, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if len(m.Layers) > maxLayers {
		return nil, fmt.Errorf("%d signatures, over the %d read", len(m.Layers), maxLayers)
	}
	var out []signedLayer
	for _, desc := range m.Layers {
		if desc.MediaType != PayloadMediaType {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(desc.Annotations[SignatureAnnotation])
		if err != nil || len(sig) == 0 {
			continue
		}
		if desc.Size > maxPayload {
			return nil, fmt.Errorf("a payload of %d bytes, over %d", desc.Size, maxPayload)
		}
		l, err := img.LayerByDigest(desc.Digest)
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		// Read to the end: go-containerregistry checks the digest there.
		b, err := io.ReadAll(io.LimitReader(rc, maxPayload+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("payload %s: %w", desc.Digest, err)
		}
		out = append(out, signedLayer{payload: b, sig: sig})
	}
	return out, nil
}

// isNotFound reports a registry's "no such manifest".
func isNotFound(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == 404 {
			return true
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return true
			}
		}
	}
	return false
}
