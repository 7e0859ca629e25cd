package cluster

import (
	"github.com/etcdbox/etcdbox/qemu"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

func TestSeed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(dir, false))
	b, err := localSeed(dir, "demo.internal", 3)
	require.NoError(t, err)
	s, err := seed.Parse(b)
	require.NoError(t, err, "seed:\n%s", b)
	assert.Equal(t, "etcdbox", s.Cluster)
	assert.Empty(t, s.Name, "one seed serves every node: the name comes from DHCP")
	assert.Equal(t, "demo.internal", s.Discovery.SRV)
	assert.Equal(t, 3, s.Discovery.InitialSize)
	assert.Empty(t, s.Discovery.Peers)
	assert.Empty(t, s.PKI.CAKey, "the root's key stays in the cluster's directory")
	ca, err := pki.ParseCertPEM([]byte(s.PKI.CACert))
	require.NoError(t, err)
	want, err := pki.LoadCAFiles(dir)
	require.NoError(t, err)
	assert.True(t, ca.Equal(want.Cert), "the seed carries the cluster's CA")
	nodeCA, err := pki.LoadCA([]byte(s.PKI.NodeCACert), []byte(s.PKI.NodeCAKey))
	require.NoError(t, err)
	assert.NoError(t, nodeCA.Cert.CheckSignatureFrom(want.Cert), "the node CA is the cluster CA's")
	assert.Equal(t, []string{"localhost", "demo.internal"}, nodeCA.Cert.PermittedDNSDomains, "kept to the cluster's domain")
}

func TestWriteEnv(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's a dir")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, WriteEnv(dir, []string{"https://127.0.0.1:4001", "https://127.0.0.1:4003"}))
	// The file is for a POSIX shell: source it and print what etcdctl sees.
	out, err := exec.Command("sh", "-c", `. "$1"; printf '%s\n' "$ETCDCTL_ENDPOINTS" "$ETCDCTL_CACERT" "$ETCDCTL_CERT" "$ETCDCTL_KEY" "$ETCDBOX_DIR" "$ETCDBOX_CACERT" "$ETCDBOX_CERT" "$ETCDBOX_KEY"`,
		"sh", filepath.Join(dir, "etcdctl.env")).Output()
	require.NoError(t, err)
	assert.Equal(t, []string{
		"https://127.0.0.1:4001,https://127.0.0.1:4003",
		filepath.Join(dir, "pki", "ca.crt"),
		filepath.Join(dir, "pki", "admin.crt"),
		filepath.Join(dir, "pki", "admin.key"),
		dir,
		filepath.Join(dir, "pki", "ca.crt"),
		filepath.Join(dir, "pki", "admin.crt"),
		filepath.Join(dir, "pki", "admin.key"),
	}, strings.Split(strings.TrimSpace(string(out)), "\n"))
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	st := State{Cluster: Name, Domain: DefaultDomain, Image: "/i.img", InitialSize: 3, MemoryMiB: 768, CPUs: 1, DiskMiB: 2048,
		Network: NetInfo{Dir: "/d/net", PID: 42},
		Nodes: []Node{{Name: "n1", Dir: "/d/n1", IP: nodeIP(1), MAC: "52:54:00:01:02:03", ClientPort: 4001, APIPort: 4002,
			Ports: map[int]int{9999: 4003}}}}
	require.NoError(t, WriteState(dir, st))
	got, err := ReadState(dir)
	require.NoError(t, err)
	assert.Equal(t, st, got)
	assert.Equal(t, 4003, got.Nodes[0].HostPort(9999))
	assert.Equal(t, 4002, got.Nodes[0].HostPort(APIPort))
	assert.Equal(t, "https://127.0.0.1:4001", got.Nodes[0].Endpoint())
	_, err = ReadState(t.TempDir())
	assert.ErrorIs(t, err, ErrNoCluster)
}

func TestNodeIP(t *testing.T) {
	assert.Equal(t, netip.MustParseAddr("10.88.0.11"), nodeIP(1))
	assert.Equal(t, netip.MustParseAddr("10.88.0.250"), nodeIP(maxNodes))
}

func TestResumable(t *testing.T) {
	st := State{Image: "/a.img", Domain: "d.internal", Nodes: []Node{{Name: "n1", Dir: t.TempDir()}, {Name: "n2", Dir: t.TempDir()}}}
	for _, tt := range []struct {
		name  string
		cfg   Config
		nodes int
		want  string
	}{
		{"defaults", Config{}, 0, ""},
		{"same count and image", Config{Image: "/a.img", Domain: "d.internal"}, 2, ""},
		{"other count", Config{}, 3, "it has 2 nodes"},
		{"other image", Config{Image: "/b.img"}, 0, "overlays of /a.img"},
		{"other domain", Config{Domain: "e.internal"}, 0, "its domain is d.internal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := resumable(st, tt.cfg, tt.nodes)
			if tt.want == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.want)
			}
		})
	}
}

func TestMembersDone(t *testing.T) {
	voter := func(name string) *pb.Member {
		return &pb.Member{Name: name, PeerURLs: []string{"https://" + name + ".d:2380"}, ClientURLs: []string{"https://" + name + ".d:2379"}}
	}
	learner := func(name string) *pb.Member { m := voter(name); m.IsLearner = true; return m }
	unstarted := &pb.Member{PeerURLs: []string{"https://n4.d:2380"}, IsLearner: true}
	three := []string{"n1", "n2", "n3"}
	for _, tt := range []struct {
		name    string
		members []*pb.Member
		names   []string
		want    int
		done    bool
		desc    string
	}{
		{"three voters", []*pb.Member{voter("n2"), voter("n1"), voter("n3")}, three, 3, true, "n1 n2 n3"},
		{"one missing", []*pb.Member{voter("n1"), voter("n2")}, three, 3, false, "n1 n2"},
		{"a learner", []*pb.Member{voter("n1"), voter("n2"), learner("n3")}, three, 3, false, "n1 n2 n3(learner)"},
		{"unstarted learner", []*pb.Member{voter("n1"), voter("n2"), voter("n3"), unstarted}, append(three, "n4"), 4, false,
			"?(learner, unstarted: https://n4.d:2380) n1 n2 n3"},
		{"a stranger", []*pb.Member{voter("n1"), voter("n2"), voter("x")}, three, 3, false, "n1 n2 x"},
		{"one too many", []*pb.Member{voter("n1"), voter("n2"), voter("n3"), voter("n4")}, three, 3, false, "n1 n2 n3 n4"},
		{"no list yet", nil, three, 3, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.done, membersDone(tt.members, tt.names, tt.want), "membersDone")
			assert.Equal(t, tt.desc, describeMembers(tt.members), "describeMembers")
		})
	}
}

func TestIsNode(t *testing.T) {
	n4 := Node{Name: "n4", IP: nodeIP(4)}
	for _, tt := range []struct {
		name string
		m    *pb.Member
		want bool
	}{
		{"started", &pb.Member{Name: "n4"}, true},
		{"another started", &pb.Member{Name: "n3", PeerURLs: []string{"https://n4.d:2380"}}, false},
		{"unstarted by dns name", &pb.Member{PeerURLs: []string{"https://n4.d:2380"}}, true},
		{"unstarted by ip", &pb.Member{PeerURLs: []string{"https://10.88.0.14:2380"}}, true},
		{"unstarted other", &pb.Member{PeerURLs: []string{"https://n5.d:2380"}}, false},
		{"bad url", &pb.Member{PeerURLs: []string{"::"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, isNode(tt.m, n4, "d"))
		})
	}
}

func TestSlotOf(t *testing.T) {
	for _, tt := range []struct{ console, want string }{
		{"", "-"},
		{"[    0.000000] Command line: initrd=\\etcdbox\\a\\initrd console=ttyS0,115200 panic=10 etcdbox.slot=a\n", "a"},
		{"Command line: etcdbox.slot=a\nreboot\nCommand line: etcdbox.slot=b quiet\n", "b"},
	} {
		assert.Equal(t, tt.want, slotOf(tt.console), "slotOf(%q)", tt.console)
	}
}

func TestRole(t *testing.T) {
	assert.Equal(t, "-", NodeStatus{}.Role())
	assert.Equal(t, "voter", NodeStatus{MemberStatus: MemberStatus{MemberID: 1}}.Role())
	assert.Equal(t, "learner", NodeStatus{MemberStatus: MemberStatus{MemberID: 1, Learner: true}}.Role())
}

func TestPinImage(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	src := filepath.Join(other, "etcdbox.img")
	require.NoError(t, os.WriteFile(src, []byte("v1"), 0o644))
	got, err := pinImage(src, dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, BaseImage), got)
	assert.True(t, sameFile(src, got), "a hard link on one file system")
	again, err := pinImage(src, dir)
	require.NoError(t, err)
	assert.Equal(t, got, again)
	// A rebuild renames a new file over src: the pinned image keeps v1.
	require.NoError(t, os.WriteFile(src+".tmp", []byte("v2"), 0o644))
	require.NoError(t, os.Rename(src+".tmp", src))
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	assert.Equal(t, "v1", string(b))
	assert.False(t, sameFile(src, got))
	// An image inside the cluster directory (the one up builds) is used as it is.
	own := filepath.Join(dir, "etcdbox.img")
	require.NoError(t, os.WriteFile(own, []byte("v3"), 0o644))
	got, err = pinImage(own, dir)
	require.NoError(t, err)
	assert.Equal(t, own, got)
}

func TestCopySparse(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := make([]byte, 3<<20+5)
	copy(data[1<<20:], "data")
	data[len(data)-1] = 1
	require.NoError(t, os.WriteFile(src, data, 0o644))
	dst := filepath.Join(dir, "dst")
	require.NoError(t, qemu.CopySparse(dst, src))
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, data, got)
}
