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
	s := &Seed{Cluster: "demo", Discovery: Discovery{SRV: "etcdbox.test"}}
	p, legacy, err := IssuingPKIFrom(dir, s.NodeScope())
	require.NoError(t, err)
	assert.False(t, legacy)
	assert.Empty(t, p.CAKey, "the root's key stays with the operator")
	s.PKI = p
	b, err := s.Marshal()
	require.NoError(t, err)
	back, err := Parse(b)
	require.NoError(t, err)
	nodeCA, err := pki.LoadCA([]byte(back.PKI.NodeCACert), []byte(back.PKI.NodeCAKey))
	require.NoError(t, err, "the seed's node CA issues")
	assert.Equal(t, []string{"localhost", "etcdbox.test"}, nodeCA.Cert.PermittedDNSDomains)
	want, err := pki.LoadCAFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, string(want.CertPEM()), back.PKI.CACert)
	assert.NoError(t, nodeCA.Cert.CheckSignatureFrom(want.Cert))
	assert.Equal(t, DefaultLeafLifetime, back.PKI.LeafLife())

	_, _, err = IssuingPKIFrom(filepath.Join(t.TempDir(), "none"), pki.NodeScope{})
	assert.Error(t, err)
}

func TestNodeScope(t *testing.T) {
	s := &Seed{Name: "n1", Discovery: Discovery{Peers: []Peer{{Name: "n1", Host: "10.0.0.1"}, {Name: "n2", Host: "n2.lan"}}},
		Network: Network{Interfaces: []Interface{{Addresses: []string{"10.1.0.5/24"}}}}}
	sc := s.NodeScope()
	assert.Equal(t, []string{"n1", "n1", "n2", "n2.lan"}, sc.Names)
	var nets []string
	for _, n := range sc.Networks {
		nets = append(nets, n.String())
	}
	assert.Equal(t, []string{"10.0.0.1/32", "10.1.0.0/24"}, nets)
}
