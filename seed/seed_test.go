package seed

import (
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/pki"
)

// fixture holds PEM material for seeds.
type fixture struct {
	caCert, caKey         string
	cert, key             string // peer leaf from the CA
	clientCert            string // client-only leaf from the CA
	otherCert, otherKey   string // peer leaf from another CA
	nodeCACert, nodeCAKey string // a node CA under the CA
	otherNodeCACert       string // a node CA under another CA
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ca, err := pki.NewCA("seed-test-ca", 0)
	require.NoError(t, err)
	caKey, err := ca.KeyPEM()
	require.NoError(t, err)
	cert, key, err := ca.Issue(pki.Leaf{CommonName: "n1", DNSNames: []string{"n1"}, Server: true, Client: true})
	require.NoError(t, err)
	client, _, err := ca.Issue(pki.Leaf{CommonName: "c", Client: true})
	require.NoError(t, err)
	other, err := pki.NewCA("other-ca", 0)
	require.NoError(t, err)
	otherCert, otherKey, err := other.Issue(pki.Leaf{CommonName: "n1", DNSNames: []string{"n1"}, Server: true, Client: true})
	require.NoError(t, err)
	nodeCA, err := ca.IssueNodeCA(pki.NodeScope{}, 0)
	require.NoError(t, err)
	nodeCAKey, err := nodeCA.KeyPEM()
	require.NoError(t, err)
	otherNodeCA, err := other.IssueNodeCA(pki.NodeScope{}, 0)
	require.NoError(t, err)
	return fixture{
		caCert: string(ca.CertPEM()), caKey: string(caKey),
		cert: string(cert), key: string(key), clientCert: string(client),
		otherCert: string(otherCert), otherKey: string(otherKey),
		nodeCACert: string(nodeCA.CertPEM()), nodeCAKey: string(nodeCAKey),
		otherNodeCACert: string(otherNodeCA.CertPEM()),
	}
}

// block renders PEM text as a YAML literal block at the given indentation.
func block(pem string, indent int) string {
	pad := strings.Repeat(" ", indent)
	return "|\n" + pad + strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n"+pad)
}

// issuing is the pki section of a seed whose node issues its own leaves.
func (f fixture) issuing() string {
	return "pki:\n  caCert: " + block(f.caCert, 4) + "\n  caKey: " + block(f.caKey, 4) + "\n"
}

func TestParseGood(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		yaml string
		want func(s *Seed) // adjusts the expected seed, which starts as the defaults
	}{
		{
			name: "minimal",
			yaml: "cluster: demo\n" + f.issuing(),
		},
		{
			name: "trusted keys",
			yaml: "cluster: demo\nupgrade:\n  trustedKeys:\n    - |\n" + indent(trustedKey, "      ") + f.issuing(),
			want: func(s *Seed) { s.Upgrade.TrustedKeys = []string{trustedKey} },
		},
		{
			name: "etcd maintenance settings",
			yaml: "cluster: demo\netcd: {autoCompactionRetention: \"0\", quotaBackendBytes: 4294967296}\n" + f.issuing(),
			want: func(s *Seed) {
				s.Etcd.AutoCompactionRetention = "0"
				s.Etcd.QuotaBackendBytes = 4 << 30
			},
		},
		{
			name: "static peers and network",
			yaml: `cluster: prod-1
name: n2
discovery:
  peers:
    - {name: n1, host: 10.0.0.11}
    - {name: n2, host: 10.0.0.12, peerPort: 12380}
    - {name: n3, host: n3.example.internal, clientPort: 12379, httpPort: 12382}
network:
  interfaces:
    - name: eth0
      addresses: [10.0.0.12/24, "fd00::12/64"]
      gateway: 10.0.0.1
      mtu: 9000
    - mac: 52:54:00:AB:CD:EF
      dhcp: true
  dns: [10.0.0.1, "fd00::1"]
  search: [example.internal]
etcd:
  clientPort: 3379
  peerPort: 3380
  httpPort: 3382
api:
  port: 9000
` + f.issuing(),
			want: func(s *Seed) {
				s.Cluster, s.Name = "prod-1", "n2"
				s.Discovery = Discovery{InitialSize: 3, Peers: []Peer{
					{Name: "n1", Host: "10.0.0.11", PeerPort: 3380, ClientPort: 3379, HTTPPort: 3382},
					{Name: "n2", Host: "10.0.0.12", PeerPort: 12380, ClientPort: 3379, HTTPPort: 3382},
					{Name: "n3", Host: "n3.example.internal", PeerPort: 3380, ClientPort: 12379, HTTPPort: 12382},
				}}
				s.Network = Network{
					Interfaces: []Interface{
						{Name: "eth0", Addresses: []string{"10.0.0.12/24", "fd00::12/64"}, Gateway: "10.0.0.1", MTU: 9000},
						{MAC: "52:54:00:AB:CD:EF", DHCP: true},
					},
					DNS:    []string{"10.0.0.1", "fd00::1"},
					Search: []string{"example.internal"},
				}
				s.Etcd = Etcd{ClientPort: 3379, PeerPort: 3380, HTTPPort: 3382, AutoCompactionRetention: "1h"}
				s.API.Port = 9000
				assert.Equal(t, 12382, s.HTTPPortOf("n3"))
				assert.Equal(t, 3382, s.HTTPPortOf("n1"))
				assert.Equal(t, 3382, s.HTTPPortOf("found-by-srv"))
			},
		},
		{
			name: "srv discovery and one unnamed interface",
			yaml: `cluster: demo
discovery: {srv: example.internal., srvName: blue, initialSize: 3}
network:
  interfaces:
    - addresses: [192.168.1.5/32]
      gateway: 192.168.1.1
` + f.issuing(),
			want: func(s *Seed) {
				s.Discovery = Discovery{SRV: "example.internal.", SRVName: "blue", InitialSize: 3}
				s.Network.Interfaces = []Interface{{Addresses: []string{"192.168.1.5/32"}, Gateway: "192.168.1.1"}}
			},
		},
		{
			name: "own certificate",
			yaml: "cluster: demo\npki:\n  caCert: " + block(f.caCert, 4) + "\n  cert: " + block(f.cert, 4) + "\n  key: " + block(f.key, 4) + "\n",
			want: func(s *Seed) {
				s.PKI = PKI{CACert: f.caCert, Cert: f.cert, Key: f.key}
			},
		},
		{
			name: "upgrade settings",
			yaml: "cluster: demo\nupgrade:\n  registries: [10.88.0.1:5000, registry.example.com]\n  insecureRegistries: [10.88.0.1:5000]\n  tries: 2\n  settleSeconds: 5\n  gateSeconds: 60\n" + f.issuing(),
			want: func(s *Seed) {
				s.Upgrade = Upgrade{Registries: []string{"10.88.0.1:5000", "registry.example.com"}, InsecureRegistries: []string{"10.88.0.1:5000"}, Tries: 2, SettleSeconds: 5, GateSeconds: 60}
			},
		},
		{
			name: "backups every 10 minutes, twenty kept",
			yaml: "cluster: demo\nbackup: {interval: 10m, keep: 20}\n" + f.issuing(),
			want: func(s *Seed) { s.Backup = Backup{Interval: "10m", Keep: 20} },
		},
		{
			name: "no scheduled backups",
			yaml: "cluster: demo\nbackup: {interval: \"0\"}\n" + f.issuing(),
			want: func(s *Seed) { s.Backup.Interval = "0" },
		},
		{
			name: "null sections",
			yaml: "cluster: demo\ndiscovery:\nnetwork: ~\n" + f.issuing(),
		},
		{
			name: "JSON",
			yaml: `{"cluster": "demo", "etcd": {"clientPort": 2379}, "pki": {"caCert": ` + jsonString(f.caCert) + `, "caKey": ` + jsonString(f.caKey) + `}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml))
			require.NoError(t, err)
			want := &Seed{
				Cluster:   "demo",
				Discovery: Discovery{InitialSize: 1},
				PKI:       PKI{CACert: f.caCert, CAKey: f.caKey},
				Etcd:      Etcd{ClientPort: 2379, PeerPort: 2380, HTTPPort: 2382, AutoCompactionRetention: "1h"},
				API:       API{Port: 9379},
				Upgrade:   Upgrade{Tries: 3, SettleSeconds: 30, GateSeconds: 300},
				Backup:    Backup{Interval: "30m", Keep: 6},
			}
			if tt.want != nil {
				tt.want(want)
			}
			// YAML literal blocks end in one newline, like PEM.
			assert.Equal(t, want, got)
		})
	}
}

func jsonString(s string) string {
	return `"` + strings.ReplaceAll(s, "\n", `\n`) + `"`
}

func TestParseReportsOnce(t *testing.T) {
	f := newFixture(t)
	// A mistyped cluster is not also "required"; problems found after a
	// shape problem are all kept, even several at one path.
	in := "cluster: 123\n" + "pki:\n  caCert: " + block(f.caCert, 4) + "\n  caKey: " + block(f.caKey, 4) + "\n  key: " + block(f.key, 4) + "\n"
	_, err := Parse([]byte(in))
	var merr *multierror.Error
	require.ErrorAs(t, err, &merr)
	assert.Equal(t, "cluster: want a string, got number 123; pki: key without cert; pki: nodeCACert/nodeCAKey, caKey and cert/key are exclusive", err.Error())
}

func TestParseSyntax(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{name: "duplicate key", yaml: "cluster: a\ncluster: b\n", want: `"cluster" already set`},
		{name: "bad indentation", yaml: "cluster: a\n  name: b\n", want: "line 2"},
		{name: "tab", yaml: "cluster: a\n\tname: b\n", want: "parse seed YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

func TestSeedMarshal(t *testing.T) {
	f := newFixture(t)
	in := &Seed{
		Cluster: "demo",
		Name:    "n1",
		Discovery: Discovery{Peers: []Peer{
			{Name: "n1", Host: "10.0.0.11"}, {Name: "n2", Host: "10.0.0.12"},
		}},
		Network: Network{Interfaces: []Interface{{Name: "eth0", Addresses: []string{"10.0.0.11/24"}, Gateway: "10.0.0.1"}}},
		PKI:     PKI{CACert: f.caCert, CAKey: f.caKey},
	}
	data, err := in.Marshal()
	require.NoError(t, err)
	assert.NotContains(t, string(data), "etcd:", "zero sections are left out")
	assert.NotContains(t, string(data), "srv:", "empty keys are left out")

	out, err := Parse(data)
	require.NoError(t, err, "Parse(Marshal()):\n%s", data)
	in.ApplyDefaults()
	assert.Equal(t, in, out)

	// With defaults applied it still round-trips.
	data, err = out.Marshal()
	require.NoError(t, err)
	again, err := Parse(data)
	require.NoError(t, err)
	assert.Equal(t, out, again)

	_, err = (&Seed{Name: "N"}).Marshal()
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "cluster", fe.Path)
}

func TestValidName(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"n1", true}, {"a", true}, {"0", true}, {"etcd-a1b2c3", true}, {strings.Repeat("a", 63), true},
		{"", false}, {"N1", false}, {"-a", false}, {"a-", false}, {"a_b", false}, {"a.b", false}, {strings.Repeat("a", 64), false},
		{"etcdbox-admin", false}, {"etcdbox-admin2", true}, {"etcdbox", true}, {"etcdbox-peer", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ValidName(tt.in), "ValidName(%q)", tt.in)
	}
}

func TestSeedRejectsAdminName(t *testing.T) {
	_, err := Parse([]byte("cluster: c1\nname: etcdbox-admin\ndiscovery: {srv: example.internal}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"etcdbox-admin" is not a valid node name`)
	assert.Equal(t, "etcd-0a0b0c", DefaultNodeName("etcdbox-admin.example.internal", []byte{1, 2, 0x0a, 0x0b, 0x0c}),
		"a host named like the admin certificate gets a name from its MAC")
}

func TestDefaultNodeName(t *testing.T) {
	mac, err := net.ParseMAC("52:54:00:ab:cd:ef")
	require.NoError(t, err)
	tests := []struct {
		name, hostname string
		mac            net.HardwareAddr
		want           string
	}{
		{name: "hostname", hostname: "node-1", mac: mac, want: "node-1"},
		{name: "fqdn", hostname: "Node-1.example.internal", mac: mac, want: "node-1"},
		{name: "kernel default", hostname: "(none)", mac: mac, want: "etcd-abcdef"},
		{name: "localhost", hostname: "localhost", mac: mac, want: "etcd-abcdef"},
		{name: "empty", hostname: "", mac: mac, want: "etcd-abcdef"},
		{name: "no mac", hostname: "", want: "etcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DefaultNodeName(tt.hostname, tt.mac)
			assert.Equal(t, tt.want, got, "DefaultNodeName(%q, %v)", tt.hostname, tt.mac)
			assert.True(t, ValidName(got))
		})
	}
}

func TestFieldError(t *testing.T) {
	err := error(&FieldError{Path: "network.dns[0]", Problem: `invalid IP address "x"`})
	assert.Equal(t, `network.dns[0]: invalid IP address "x"`, err.Error())
	var fe *FieldError
	assert.True(t, errors.As(multierror.Append(nil, err), &fe))
}

// TestSuggest: the nearest known key, or none when every key is far.
func TestSuggest(t *testing.T) {
	fields := jsonFields(reflect.TypeFor[Seed]())
	for k, want := range map[string]string{
		"nmae":       ` (did you mean "name"?)`,
		"clustre":    ` (did you mean "cluster"?)`,
		"DISCOVERY":  ` (did you mean "discovery"?)`,
		"upgarde":    ` (did you mean "upgrade"?)`,
		"zzz":        "",
		"ap":         ` (did you mean "api"?)`,
		"networking": "",
	} {
		assert.Equal(t, want, suggest(k, fields), k)
	}
	assert.Equal(t, 1, editDistance("nmae", "name"), "a swap of neighbours counts once")
	assert.Equal(t, 3, editDistance("", "api"))
}

// trustedKey is a public key in PEM (imagesig.GenerateKey's).
const trustedKey = `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKSSJ9BpEIb52bpWQ3HcaAvKjzkIx
LhoznFwjz6Rb57ACVoeHK+0amfEq2d8vzlcG8sWKHXr4BSa6ehB9nDBaiw==
-----END PUBLIC KEY-----
`

// indent prefixes every line of s with prefix.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
