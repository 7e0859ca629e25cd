package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/pki"
	fake "github.com/etcdbox/etcdbox/qemu/metadata"
	"github.com/etcdbox/etcdbox/seed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The seed from cloud metadata, through the init's own readSeed in
// container mode (--metadata-url), against the harness's protocol servers
// on loopback.

// metaSeed is a valid seed without a node name.
func metaSeed(t *testing.T) []byte {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	s := &seed.Seed{Cluster: "demo"}
	s.Discovery.SRV = "etcd.example"
	var err error
	s.PKI, _, err = seed.IssuingPKIFrom(dir, s.NodeScope())
	require.NoError(t, err)
	data, err := s.Marshal()
	require.NoError(t, err)
	return data
}

// metaNode is a container-mode node whose DATA is root, asking the
// metadata services at base; its log goes to the returned buffer.
func metaNode(root, base string) (*node, *bytes.Buffer) {
	n := newNode()
	var log bytes.Buffer
	n.log = console.New(&log)
	n.container, n.root, n.metadataURL = true, root, base
	return n, &log
}

// cloudAt serves the four clouds' paths at one base, counting requests.
func cloudAt(t *testing.T, ec2, gce, azure, openstack http.Handler) (*httptest.Server, *atomic.Int32) {
	mux := http.NewServeMux()
	for prefix, h := range map[string]http.Handler{"/latest/": ec2, "/computeMetadata/": gce, "/metadata/": azure, "/openstack/": openstack} {
		if h != nil {
			mux.Handle(prefix, h)
		}
	}
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &asked
}

func TestReadSeedFromMetadata(t *testing.T) {
	data := metaSeed(t)
	root := t.TempDir()
	srv, _ := cloudAt(t, fake.EC2(fake.Instance{Name: "Etcd-East.example", UserData: data}), nil, nil, nil)
	n, log := metaNode(root, srv.URL)
	require.NoError(t, n.readSeed(t.Context()), log.String())
	assert.Equal(t, "ec2", n.seedSource)
	assert.Equal(t, "demo", n.seed.Cluster)
	assert.Equal(t, "etcd-east", n.seed.Name, "the instance's name, first label, lower case")
	assert.Contains(t, log.String(), `seed: from EC2 IMDSv2 (user data), cluster "demo"`)
	cached, err := os.ReadFile(filepath.Join(root, "state", "seed.yaml"))
	require.NoError(t, err)
	assert.Equal(t, data, cached, "cached as it came, without the name")
	st, err := (&apiNode{n: n}).Status(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "ec2", st.SeedSource, "the node API tells the seed's source")

	// The next boot, with no metadata service: the cache, and the name
	// the instance had.
	srv.Close()
	n, log = metaNode(root, srv.URL)
	require.NoError(t, n.readSeed(t.Context()), log.String())
	assert.Equal(t, "cache", n.seedSource)
	assert.Equal(t, "etcd-east", n.seed.Name)
	assert.Contains(t, log.String(), "cloud metadata: absent: EC2 IMDSv2: not here")
}

// TestReadSeedMetadataOrder: a broken IMDS is refused and logged, and the
// next source gives the seed; a seed file comes before any metadata.
func TestReadSeedMetadataOrder(t *testing.T) {
	data := metaSeed(t)
	in := fake.Instance{Name: "etcd-o", UserData: data}
	srv, asked := cloudAt(t, fake.EC2V1Only(in), fake.GCENoFlavor(in), nil, fake.OpenStack(in))
	n, log := metaNode(t.TempDir(), srv.URL)
	require.NoError(t, n.readSeed(t.Context()), log.String())
	assert.Equal(t, "openstack", n.seedSource)
	assert.Regexp(t, `cloud metadata: EC2 IMDSv2: refused: .*going on to the next source`, log.String())
	assert.Regexp(t, `cloud metadata: GCE metadata: refused: .*without Metadata-Flavor: Google`, log.String())

	file := filepath.Join(t.TempDir(), "seed.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o600))
	asked.Store(0)
	n, log = metaNode(t.TempDir(), srv.URL)
	n.seedFile = file
	require.NoError(t, n.readSeed(t.Context()), log.String())
	assert.Equal(t, "file", n.seedSource)
	assert.Zero(t, asked.Load(), "the metadata services are not asked when the file has a seed")
	assert.Empty(t, n.seed.Name)
}

// TestReadSeedBadMetadata: a user data that is not a valid seed is
// reported, naming its source and key, and the node waits.
func TestReadSeedBadMetadata(t *testing.T) {
	srv, _ := cloudAt(t, nil, fake.GCE(fake.Instance{Name: "g", UserData: []byte("cluster: demo\nclustr: x\n")}), nil, nil)
	root := t.TempDir()
	n, log := metaNode(root, srv.URL)
	err := n.readSeed(t.Context())
	require.ErrorIs(t, err, errWait)
	assert.Contains(t, err.Error(), "seed from GCE metadata (user data) is invalid")
	assert.Contains(t, log.String(), "seed error: seed from GCE metadata (user data): ")
	assert.Contains(t, log.String(), "clustr")
	assert.NoFileExists(t, filepath.Join(root, "state", "seed.yaml"), "a bad seed is not cached")

	// off: no cloud is asked, and there is no seed.
	n, _ = metaNode(root, "off")
	require.ErrorIs(t, n.readSeed(t.Context()), errWait)
}

// TestFindConfigDrive: the config drive is found by its label, ISO9660
// here (the cidata volume's machinery: volumeLabel).
func TestFindConfigDrive(t *testing.T) {
	sys, dev := t.TempDir(), t.TempDir()
	iso := make([]byte, 17*2048)
	pvd := iso[16*2048:]
	pvd[0] = 1
	copy(pvd[1:6], "CD001")
	copy(pvd[40:72], bytes.Repeat([]byte(" "), 32))
	copy(pvd[40:], "config-2")
	for name, content := range map[string][]byte{"vda": make([]byte, 4096), "loop0": iso, "sr0": iso} {
		require.NoError(t, os.Mkdir(filepath.Join(sys, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dev, name), content, 0o644))
	}
	got, fs, err := findVolume(sys, dev, "config-2")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dev, "sr0"), got, "loop devices are skipped")
	assert.Equal(t, "iso9660", fs)
	got, _, err = findVolume(sys, dev, "cidata")
	require.NoError(t, err)
	assert.Empty(t, got)
}
