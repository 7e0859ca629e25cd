package upgrade

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ErrRegistryNotAllowed means an image reference names a registry the
// seed's upgrade.registries does not list (wrapped).
var ErrRegistryNotAllowed = errors.New("registry not allowed")

// CheckRegistry checks d's registry against allowed, the seed's
// upgrade.registries: an empty list allows any registry. Registry names
// compare case-insensitively, and "docker.io" stands for Docker Hub as it
// does in references. It makes no network request.
func CheckRegistry(d name.Digest, allowed []string) error {
	if len(allowed) == 0 {
		return nil
	}
	got := d.RegistryStr()
	for _, a := range allowed {
		r, err := name.NewRegistry(a)
		if err == nil && strings.EqualFold(r.RegistryStr(), got) {
			return nil
		}
	}
	return fmt.Errorf("image %s: %w: %s is not in the seed's upgrade.registries (%s)", d, ErrRegistryNotAllowed, got, strings.Join(allowed, ", "))
}
