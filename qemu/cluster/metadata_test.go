package cluster

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// TestMetadataServer: the network daemon's metadata service answers each
// node as its seed source says, with the cluster's seed as user data and
// the node's name, and nothing to a node that reads the seed volume.
func TestMetadataServer(t *testing.T) {
	dir := t.TempDir()
	hosts := []vnet.Host{
		{Name: "n1", MAC: qemu.MAC("n1", 0), IP: netip.MustParseAddr("10.88.0.11")},
		{Name: "n2", MAC: qemu.MAC("n2", 0), IP: netip.MustParseAddr("10.88.0.12")},
		{Name: "n3", MAC: qemu.MAC("n3", 0), IP: netip.MustParseAddr("10.88.0.13")},
	}
	n, err := vnet.New(vnet.Config{Domain: "t.internal", Hosts: hosts})
	require.NoError(t, err)
	defer n.Close()
	st := State{Cluster: Name, SeedSource: "gce", Nodes: []Node{
		{Name: "n1", SeedSource: SourceNoCloud}, {Name: "n2"}, {Name: "n3", SeedSource: "ec2-imdsv1,azure"},
	}}
	require.NoError(t, WriteState(dir, st))
	seedYAML := []byte("cluster: local\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, SeedYAML), seedYAML, 0o600))
	m := &metadataServer{net: n, dir: dir}

	get := func(node, method, path string, hdr ...string) (int, string) {
		r := httptest.NewRequest(method, "http://169.254.169.254"+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		for _, h := range hosts {
			if h.Name == node {
				r.RemoteAddr = net.JoinHostPort(h.IP.String(), "40000")
			}
		}
		w := httptest.NewRecorder()
		m.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	const gceUserData = "/computeMetadata/v1/instance/attributes/user-data"

	// n1 reads the seed volume: nothing here.
	code, _ := get("n1", http.MethodGet, gceUserData, "Metadata-Flavor", "Google")
	assert.Equal(t, http.StatusNotFound, code)
	// n2 takes the cluster's source, GCE: its user data and name, and
	// GCE's refusal of a request without the header.
	code, body := get("n2", http.MethodGet, gceUserData, "Metadata-Flavor", "Google")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, string(seedYAML), body)
	code, body = get("n2", http.MethodGet, "/computeMetadata/v1/instance/name", "Metadata-Flavor", "Google")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "n2", body)
	code, _ = get("n2", http.MethodGet, gceUserData)
	assert.Equal(t, http.StatusForbidden, code)
	code, _ = get("n2", http.MethodPut, "/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds", "60")
	assert.Equal(t, http.StatusNotFound, code, "n2's source serves no EC2")
	// n3: an IMDSv1-only EC2 (no token) and Azure, both.
	code, _ = get("n3", http.MethodPut, "/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds", "60")
	assert.NotEqual(t, http.StatusOK, code, "the broken EC2 issued a token")
	code, body = get("n3", http.MethodGet, "/metadata/instance/compute/name?api-version=2021-01-01&format=text", "Metadata", "true")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "n3", body)
	// An address that is no node's.
	r := httptest.NewRequest(http.MethodGet, "http://169.254.169.254"+gceUserData, nil)
	r.RemoteAddr = "10.88.0.99:1"
	w := httptest.NewRecorder()
	m.ServeHTTP(w, r)
	assert.Equal(t, http.StatusNotFound, w.Code)
}

func TestCheckSeedSource(t *testing.T) {
	for _, ok := range []string{"", "nocloud", "configdrive", "ec2", "gce", "azure", "openstack", "ec2-imdsv1,gce", "gce-noflavor,azure,openstack"} {
		assert.NoError(t, CheckSeedSource(ok), ok)
	}
	assert.ErrorContains(t, CheckSeedSource("aws"), `unknown "aws"`)
	assert.ErrorContains(t, CheckSeedSource("ec2,ec2-imdsv1"), "the same protocol")
	assert.ErrorContains(t, CheckSeedSource("nocloud,ec2"), `unknown "nocloud"`)
}
