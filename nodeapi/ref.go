package nodeapi

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// CheckImageRef checks that ref is an image reference an upgrade may stage:
// a named registry, a repository, and a sha256 digest, like
// registry.example:5000/etcdbox@sha256:<64 hex digits> (a tag before the
// digest is allowed and ignored). A tag alone is refused because a node must
// boot exactly the bytes the operator chose, and the registry must be
// named so that a short name never sends a node to Docker Hub.
func CheckImageRef(ref string) error {
	if ref == "" {
		return fmt.Errorf("image: required, e.g. registry.example/etcdbox@sha256:<64 hex digits>")
	}
	at := strings.LastIndexByte(ref, '@')
	if at < 0 {
		return fmt.Errorf("image %q: no digest; pin it as %s@sha256:<64 hex digits>", ref, ref)
	}
	if dig := ref[at+1:]; !strings.HasPrefix(dig, "sha256:") {
		return fmt.Errorf("image %q: digest %q is not sha256:<64 hex digits>", ref, dig)
	}
	if _, err := name.NewDigest(ref, name.StrictValidation); err != nil {
		return fmt.Errorf("image %q: %w", ref, err)
	}
	return nil
}
