package seed

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

func TestIssuingPKI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	p, err := IssuingPKIFrom(dir)
	require.NoError(t, err)
	s := &Seed{Cluster: "demo", PKI: p}
	b, err := s.Marshal()
	require.NoError(t, err)
	back, err := Parse(b)
	require.NoError(t, err)
	ca, err := pki.LoadCA([]byte(back.PKI.CACert), []byte(back.PKI.CAKey))
	require.NoError(t, err, "the seed's CA issues")
	want, err := pki.LoadCAFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, want.CertPEM(), ca.CertPEM())

	_, err = IssuingPKIFrom(filepath.Join(t.TempDir(), "none"))
	assert.Error(t, err)
}
