package upgrade

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckRegistry(t *testing.T) {
	sum := "@sha256:" + strings.Repeat("a", 64)
	tests := []struct {
		ref     string
		allowed []string
		ok      bool
	}{
		{"10.88.0.1:5000/etcdbox" + sum, nil, true},
		{"10.88.0.1:5000/etcdbox" + sum, []string{"10.88.0.1:5000"}, true},
		{"Registry.Example.com/etcdbox" + sum, []string{"registry.example.com"}, true},
		{"etcdbox/node" + sum, []string{"docker.io"}, true},
		{"10.88.0.1:5001/etcdbox" + sum, []string{"10.88.0.1:5000"}, false},
		{"evil.example.com/etcdbox" + sum, []string{"registry.example.com", "10.88.0.1:5000"}, false},
		{"registry.example.com.evil.example.com/etcdbox" + sum, []string{"registry.example.com"}, false},
	}
	for _, tt := range tests {
		d, err := name.NewDigest(tt.ref)
		require.NoError(t, err)
		err = CheckRegistry(d, tt.allowed)
		if tt.ok {
			assert.NoError(t, err, tt.ref)
			continue
		}
		require.ErrorIs(t, err, ErrRegistryNotAllowed, tt.ref)
		assert.Contains(t, err.Error(), "upgrade.registries")
	}
}
