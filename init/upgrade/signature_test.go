package upgrade

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/nodeapi"
)

// TestStagingChecksSignatures: a node whose seed trusts a key stages only
// images that key signed; an unsigned image and one signed by another key
// are refused with the reason, before anything is written to the ESP.
func TestStagingChecksSignatures(t *testing.T) {
	reg := newAgentRegistry(t)
	a := agentNode(t, reg)
	trustedPriv, trustedPub, err := imagesig.GenerateKey()
	require.NoError(t, err)
	otherPriv, _, err := imagesig.GenerateKey()
	require.NoError(t, err)
	a.Seed.TrustedKeys = []string{string(trustedPub)}
	sign := func(ref string, keyPEM []byte) {
		t.Helper()
		k, err := imagesig.ParsePrivateKey(keyPEM)
		require.NoError(t, err)
		d, err := name.NewDigest(ref, name.Insecure)
		require.NoError(t, err)
		require.NoError(t, imagesig.Sign(t.Context(), d, k))
	}
	espFiles := func() []string {
		var files []string
		root := string(a.ESP)
		require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return err
		}))
		return files
	}
	before := espFiles()
	ref := reg.push(t, "signed kernel", "signed initrd")

	for _, tt := range []struct {
		signer []byte // the key that signs before the staging; nil: none
		reason string
	}{
		{nil, "refused: the image is not signed"},
		{otherPriv, "refused: no signature by a trusted key"},
	} {
		if tt.signer != nil {
			sign(ref, tt.signer)
		}
		require.NoError(t, a.Stage(t.Context(), ref, false))
		p := waitPhase(t, a)
		require.Equal(t, nodeapi.PhaseFailed, p.Phase)
		assert.Contains(t, p.Error, tt.reason)
		assert.Equal(t, before, espFiles(), "nothing written to the ESP")
	}

	sign(ref, trustedPriv)
	require.NoError(t, a.Stage(t.Context(), ref, false))
	p := waitPhase(t, a)
	require.Equal(t, nodeapi.PhaseStaged, p.Phase, "error: %s", p.Error)
	got, err := a.ESP.ReadFile("etcdbox/b/initrd")
	require.NoError(t, err)
	assert.Equal(t, "signed initrd", string(got))
}
