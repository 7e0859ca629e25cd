package seed

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBad(t *testing.T) {
	f := newFixture(t)
	issuing := f.issuing()
	pkiWith := func(fields ...string) string {
		s := "pki:\n"
		for i := 0; i+1 < len(fields); i += 2 {
			s += "  " + fields[i] + ": " + block(fields[i+1], 4) + "\n"
		}
		return s
	}
	tests := []struct {
		name string
		yaml string
		// want maps each key path that must be reported to a part of its
		// message. No other paths may be reported.
		want map[string]string
	}{
		{name: "empty", yaml: "", want: map[string]string{"cluster": "required", "pki.caCert": "required"}},
		{name: "not a mapping", yaml: "- cluster\n", want: map[string]string{"seed": "want a mapping, got a list"}},
		{name: "scalar", yaml: "demo\n", want: map[string]string{"seed": `want a mapping, got string "demo"`}},
		{name: "unknown key", yaml: "cluster: demo\nclustr: demo\n" + issuing, want: map[string]string{"clustr": "unknown key"}},
		{
			name: "unknown key with required missing",
			yaml: "clustr: demo\n" + issuing,
			want: map[string]string{"clustr": "unknown key", "cluster": "required"},
		},
		{
			name: "unknown nested keys",
			yaml: "cluster: demo\nnetwork:\n  interfaces:\n    - name: eth0\n      dhcp: true\n    - name: eth1\n      adresses: [10.0.0.1/24]\n" + issuing,
			want: map[string]string{
				"network.interfaces[1].adresses": "unknown key",
				"network.interfaces[1]":          "needs dhcp: true or addresses",
			},
		},
		{
			name: "mistyped keys",
			yaml: "cluster: demo\nnmae: n1\nnetwork:\n  interfaces:\n    - name: eth0\n      adresses: [10.0.0.1/24]\n      dhcp: true\n  zzz: 1\n" + issuing,
			want: map[string]string{
				"nmae":                           `unknown key (did you mean "name"?)`,
				"network.interfaces[0].adresses": `unknown key (did you mean "addresses"?)`,
				"network.zzz":                    "unknown key",
			},
		},
		{
			name: "wrong case",
			yaml: "cluster: demo\netcd: {clientport: 2379}\n" + issuing,
			want: map[string]string{"etcd.clientport": `unknown key (did you mean "clientPort"?)`},
		},
		{name: "bad node name", yaml: "cluster: demo\nname: N1\n" + issuing, want: map[string]string{"name": `"N1" is not a valid node name`}},
		{name: "bad backup settings", yaml: "cluster: demo\nbackup: {interval: 5s, keep: 500}\n" + issuing,
			want: map[string]string{"backup.interval": `"5s": shorter than 10s`, "backup.keep": "500: want 1 to 100"}},
		{name: "backup interval not a duration", yaml: "cluster: demo\nbackup: {interval: hourly}\n" + issuing,
			want: map[string]string{"backup.interval": `"hourly": want a duration such as 30m or 1h, or 0 for no scheduled backups`}},
		{name: "backup push without a path, and half the credentials", yaml: "cluster: demo\nbackup: {push: {repository: 'registry.example:5000', password: hunter2}}\n" + issuing,
			want: map[string]string{"backup.push.repository": `"registry.example:5000": want host[:port]/path, the path in lower case, without a tag or digest`, "backup.push": "username and password: give both or neither"}},
		{name: "backup push with a scheme and a tag", yaml: "cluster: demo\nbackup: {push: {repository: 'https://registry.example/backups:v1'}}\n" + issuing,
			want: map[string]string{"backup.push.repository": `"https://registry.example/backups:v1": want host[:port]/path, without a scheme`}},
		{name: "recovery directive without a survivor, and a bad token", yaml: "cluster: demo\nrecovery: {token: 'recover-xyz'}\n" + issuing,
			want: map[string]string{"recovery.survivor": `"": want the surviving node's name`, "recovery.token": "want recover-<cluster ID>-<member ID> in hex"}},
		{name: "backup push without a repository", yaml: "cluster: demo\nbackup: {push: {insecure: true}}\n" + issuing,
			want: map[string]string{"backup.push.repository": "required: the OCI repository backups are pushed to (host[:port]/path)"}},
		{name: "bad upgrade settings", yaml: "cluster: demo\nupgrade: {registries: [\"https://r.example.com\", r.example.com/etcdbox, \"r:\"], insecureRegistries: [nohost], tries: 12, settleSeconds: 90, gateSeconds: 60}\n" + issuing,
			want: map[string]string{"upgrade.insecureRegistries[0]": `"nohost": want host:port`,
				"upgrade.registries[0]": `"https://r.example.com": want a registry host (and port), without a scheme`,
				"upgrade.registries[1]": `"r.example.com/etcdbox": want a registry host (and port), without a path`,
				"upgrade.registries[2]": `"r:": want host or host:port`, "upgrade.tries": "12: want 1 to 9", "upgrade": "settleSeconds 90 must be shorter than gateSeconds 60"}},
		{name: "bad trusted key", yaml: "cluster: demo\nupgrade: {trustedKeys: [cosign.pub]}\n" + issuing,
			want: map[string]string{"upgrade.trustedKeys[0]": "not a public key: no PEM block"}},
		{name: "bad etcd maintenance settings", yaml: "cluster: demo\netcd: {autoCompactionRetention: 1d, quotaBackendBytes: 1000}\n" + issuing,
			want: map[string]string{"etcd.autoCompactionRetention": `"1d": want a duration such as 30m or 2h`, "etcd.quotaBackendBytes": "1000: want 67108864 (64 MiB) to 68719476736 (64 GiB)"}},
		{name: "short compaction retention, huge quota", yaml: "cluster: demo\netcd: {autoCompactionRetention: 10s, quotaBackendBytes: 137438953472}\n" + issuing,
			want: map[string]string{"etcd.autoCompactionRetention": `"10s": shorter than 1m0s`, "etcd.quotaBackendBytes": "137438953472: want"}},
		{name: "bad cluster name", yaml: "cluster: my_cluster\n" + issuing, want: map[string]string{"cluster": `"my_cluster" is not a valid cluster name`}},
		{name: "long cluster name", yaml: "cluster: " + strings.Repeat("a", 64) + "\n" + issuing, want: map[string]string{"cluster": "not a valid cluster name"}},
		{name: "number for string", yaml: "cluster: 123\n" + issuing, want: map[string]string{"cluster": "want a string, got number 123"}},
		{name: "string for integer", yaml: "cluster: demo\netcd: {clientPort: big}\n" + issuing, want: map[string]string{"etcd.clientPort": `want an integer, got string "big"`}},
		{name: "fraction for integer", yaml: "cluster: demo\netcd: {peerPort: 2380.5}\n" + issuing, want: map[string]string{"etcd.peerPort": "want an integer, got number 2380.5"}},
		{name: "string for bool", yaml: "cluster: demo\nnetwork: {interfaces: [{dhcp: \"on\"}]}\n" + issuing, want: map[string]string{"network.interfaces[0].dhcp": `want true or false, got string "on"`, "network.interfaces[0]": "needs dhcp"}},
		{name: "mapping for list", yaml: "cluster: demo\ndiscovery: {peers: {name: n1}}\n" + issuing, want: map[string]string{"discovery.peers": "want a list, got a mapping"}},
		{name: "list for mapping", yaml: "cluster: demo\nnetwork: []\n" + issuing, want: map[string]string{"network": "want a mapping, got a list"}},
		{
			name: "addresses",
			yaml: "cluster: demo\nnetwork:\n  interfaces:\n    - name: eth0\n      addresses: [10.0.0.11/24, x, 10.0.0.12]\n      gateway: 10.0.0.256\n      mtu: 10\n" + issuing,
			want: map[string]string{
				"network.interfaces[0].addresses[1]": `invalid CIDR "x"`,
				"network.interfaces[0].addresses[2]": `invalid CIDR "10.0.0.12" (want address/prefix length, e.g. 10.0.0.12/24)`,
				"network.interfaces[0].gateway":      `invalid IP address "10.0.0.256"`,
				"network.interfaces[0].mtu":          "10 out of range 68-65535",
			},
		},
		{
			name: "interfaces",
			yaml: `cluster: demo
network:
  interfaces:
    - {name: eth0, dhcp: true}
    - {name: eth0, dhcp: true}
    - {mac: "52:54:00:00:00:01", dhcp: true}
    - {mac: "52-54-00-00-00-01", dhcp: true}
    - {mac: "zz", name: "a/b", dhcp: true}
    - {dhcp: true}
    - {name: this-name-is-too-long, dhcp: true}
  dns: [10.0.0.1, resolver]
  search: [example.internal, -bad-]
` + issuing,
			want: map[string]string{
				"network.interfaces[1].name": `"eth0" already used by network.interfaces[0]`,
				"network.interfaces[3].mac":  "52:54:00:00:00:01 already used by network.interfaces[2]",
				"network.interfaces[4].mac":  `invalid MAC address "zz"`,
				"network.interfaces[4].name": `"a/b" is not a valid interface name`,
				"network.interfaces[5]":      "name or mac required when several interfaces are listed",
				"network.interfaces[6].name": "not a valid interface name",
				"network.dns[1]":             `invalid IP address "resolver"`,
				"network.search[1]":          `"-bad-" is not a valid domain name`,
			},
		},
		{
			name: "srv and peers",
			yaml: "cluster: demo\ndiscovery:\n  srv: example.internal\n  peers: [{name: n1, host: 10.0.0.1}]\n" + issuing,
			want: map[string]string{"discovery": "srv and peers are exclusive"},
		},
		{
			name: "srv names",
			yaml: "cluster: demo\ndiscovery: {srv: \"bad domain\", initialSize: -1}\n" + issuing,
			want: map[string]string{"discovery.srv": `"bad domain" is not a valid domain name`, "discovery.initialSize": "-1 is negative"},
		},
		{
			name: "srvName without srv",
			yaml: "cluster: demo\ndiscovery: {srvName: blue}\n" + issuing,
			want: map[string]string{"discovery.srvName": "needs discovery.srv"},
		},
		{
			name: "peers",
			yaml: `cluster: demo
discovery:
  initialSize: 9
  peers:
    - {name: n1, host: 10.0.0.1}
    - {name: n1, host: 10.0.0.2}
    - {host: 10.0.0.3}
    - {name: n4}
    - {name: n5, host: "bad host", peerPort: 70000, clientPort: -1}
    - {name: n6, host: 10.0.0.1, peerPort: 2380}
    - {name: n7, host: 10.0.0.7, apiPort: 0x10000}
    - {name: n8, host: 10.0.0.8, peerPort: 4000, apiPort: 4000}
` + issuing,
			want: map[string]string{
				"discovery.peers[1].name":       `"n1" already used by discovery.peers[0]`,
				"discovery.peers[2].name":       "required",
				"discovery.peers[3].host":       "required",
				"discovery.peers[4].host":       `"bad host" is not an IP address or DNS name`,
				"discovery.peers[4].peerPort":   "port 70000 out of range 1-65535",
				"discovery.peers[4].clientPort": "port -1 out of range",
				"discovery.peers[5]":            "peer address 10.0.0.1:2380 already used by discovery.peers[0]",
				"discovery.peers[6].apiPort":    "port 65536 out of range 1-65535",
				"discovery.peers[7].apiPort":    "4000 is also an etcd port of this peer",
				"discovery.initialSize":         "9 exceeds the 8 peers listed",
			},
		},
		{
			name: "ports",
			yaml: "cluster: demo\netcd: {clientPort: 2380}\napi: {port: 0x10000}\n" + issuing,
			want: map[string]string{
				"etcd":     "clientPort and peerPort are both 2380",
				"api.port": "port 65536 out of range 1-65535",
			},
		},
		{
			name: "api port collides",
			yaml: "cluster: demo\napi: {port: 2379}\n" + issuing,
			want: map[string]string{"api.port": "2379 is also an etcd port"},
		},
		{name: "etcd log level, compaction mode, metrics port", yaml: "cluster: demo\netcd: {logLevel: verbose, autoCompactionMode: hourly, metricsPort: 70000}\n" + issuing,
			want: map[string]string{"etcd.logLevel": `"verbose": want one of debug, info, warn, error, panic, fatal`,
				"etcd.autoCompactionMode": `"hourly": want periodic or revision`, "etcd.metricsPort": "port 70000 out of range 1-65535"}},
		{name: "revision compaction without a count", yaml: "cluster: demo\netcd: {autoCompactionMode: revision}\n" + issuing,
			want: map[string]string{"etcd.autoCompactionRetention": `"": in revision mode, want a positive number of revisions`}},
		{name: "revision compaction by a duration", yaml: "cluster: demo\netcd: {autoCompactionMode: revision, autoCompactionRetention: 1h}\n" + issuing,
			want: map[string]string{"etcd.autoCompactionRetention": `"1h": in revision mode, want a positive number`}},
		{name: "revision compaction of 0", yaml: "cluster: demo\netcd: {autoCompactionMode: revision, autoCompactionRetention: \"0\"}\n" + issuing,
			want: map[string]string{"etcd.autoCompactionRetention": `"0": in revision mode`}},
		{name: "metrics on the client port", yaml: "cluster: demo\netcd: {metricsPort: 2379}\n" + issuing,
			want: map[string]string{"etcd.metricsPort": "2379 is also the client, peer or node API port"}},
		{name: "metrics on the peer port", yaml: "cluster: demo\netcd: {peerPort: 3000, metricsPort: 3000}\n" + issuing,
			want: map[string]string{"etcd.metricsPort": "3000 is also the client, peer or node API port"}},
		{name: "HTTP on the peer port", yaml: "cluster: demo\netcd: {httpPort: 2380}\n" + issuing,
			want: map[string]string{"etcd.httpPort": "2380 is also the peer, node API or metrics port"}},
		{name: "metrics on the HTTP port's default", yaml: "cluster: demo\netcd: {metricsPort: 2382}\n" + issuing,
			want: map[string]string{"etcd.httpPort": "2382 (its default) is also the peer, node API or metrics port"}},
		{name: "HTTP port out of range, and a peer's on its API port", yaml: "cluster: demo\netcd: {httpPort: 0x10000}\ndiscovery:\n  peers:\n    - {name: n1, host: 10.0.0.1, apiPort: 9000, httpPort: 9000}\n" + issuing,
			want: map[string]string{"etcd.httpPort": "port 65536 out of range 1-65535", "discovery.peers[0].httpPort": "9000 is also the peer or node API port of this peer"}},
		{name: "metrics on the node API port", yaml: "cluster: demo\netcd: {metricsPort: 9379}\n" + issuing,
			want: map[string]string{"etcd.metricsPort": "9379 is also the client, peer or node API port"}},
		{
			name: "extra etcd flags that undo TLS or that etcdbox owns",
			yaml: "cluster: demo\netcd:\n  extraArgs:\n" + listOf(
				"--client-cert-auth=false", "--peer-client-cert-auth=false", "--auto-tls=true", "--peer-auto-tls=true",
				"--tls-min-version=TLS1.2", "--cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA", "--discovery-insecure-transport=true",
				"--listen-client-urls=http://0.0.0.0:2379", "--trusted-ca-file=/tmp/ca.crt", "--name=x", "--data-dir=/tmp",
				"--initial-cluster=a=http://a:2380", "--quota-backend-bytes=1", "--log-level=debug", "--auto-compaction-retention=1",
				"--listen-metrics-urls=http://0.0.0.0:2381", "--unsafe-no-fsync=true", "--force-new-cluster=true",
				"--peer-cert-allowed-cn=x", "--enable-pprof=true", "--heartbeat-intervall=100", "--logger=zap") + issuing,
			want: map[string]string{
				"etcd.extraArgs[0]":  "--client-cert-auth: would weaken TLS or client-certificate auth",
				"etcd.extraArgs[1]":  "--peer-client-cert-auth: would weaken TLS",
				"etcd.extraArgs[2]":  "--auto-tls: would weaken TLS",
				"etcd.extraArgs[3]":  "--peer-auto-tls: would weaken TLS",
				"etcd.extraArgs[4]":  "--tls-min-version: would weaken TLS",
				"etcd.extraArgs[5]":  "--cipher-suites: would weaken TLS",
				"etcd.extraArgs[6]":  "--discovery-insecure-transport: would weaken TLS",
				"etcd.extraArgs[7]":  "--listen-client-urls: etcdbox sets this flag itself",
				"etcd.extraArgs[8]":  "--trusted-ca-file: would weaken TLS",
				"etcd.extraArgs[9]":  "--name: etcdbox sets this flag itself",
				"etcd.extraArgs[10]": "--data-dir: etcdbox sets this flag itself",
				"etcd.extraArgs[11]": "--initial-cluster: etcdbox sets this flag itself",
				"etcd.extraArgs[12]": "--quota-backend-bytes: has its own key: etcd.quotaBackendBytes",
				"etcd.extraArgs[13]": "--log-level: has its own key: etcd.logLevel",
				"etcd.extraArgs[14]": "--auto-compaction-retention: has its own key: etcd.autoCompactionRetention",
				"etcd.extraArgs[15]": "--listen-metrics-urls: has its own key: etcd.metricsPort",
				"etcd.extraArgs[16]": "--unsafe-no-fsync: unsafe",
				"etcd.extraArgs[17]": "--force-new-cluster: unsafe",
				"etcd.extraArgs[18]": "--peer-cert-allowed-cn: would weaken TLS",
				"etcd.extraArgs[19]": "--enable-pprof: would weaken TLS",
				"etcd.extraArgs[20]": "--heartbeat-intervall: not one of the tuning flags etcdbox passes to etcd (README, Seed) (did you mean --heartbeat-interval?)",
				"etcd.extraArgs[21]": "--logger: etcdbox sets this flag itself",
			},
		},
		{
			name: "extra etcd flags of the wrong form or value, or twice",
			yaml: "cluster: demo\netcd:\n  extraArgs:\n" + listOf(
				"--snapshot-count=0", "max-txn-ops=10", "--memory-mlock", "--max-request-bytes=1MiB", "--grpc-keepalive-timeout=5",
				"--metrics=all", "--pre-vote=yes", "--snapshot-count=100", "--feature-gates=InitialCorruptCheck=false",
				"--feature-gates=AllAlpha=true", "-----BEGIN PRIVATE KEY-----", "--max-wals="+strings.Repeat("9", 300)) + issuing,
			want: map[string]string{
				"etcd.extraArgs[0]":  `--snapshot-count="0": want a positive whole number`,
				"etcd.extraArgs[1]":  `"max-txn-ops=10": want --name=value`,
				"etcd.extraArgs[2]":  `"--memory-mlock": want --name=value (booleans too: --memory-mlock=true)`,
				"etcd.extraArgs[3]":  `--max-request-bytes="1MiB": want a whole number`,
				"etcd.extraArgs[4]":  `--grpc-keepalive-timeout="5": want a duration such as 500ms or 10s`,
				"etcd.extraArgs[5]":  `--metrics="all": want one of basic, extensive`,
				"etcd.extraArgs[6]":  `--pre-vote="yes": want true or false`,
				"etcd.extraArgs[7]":  "--snapshot-count already given by etcd.extraArgs[0]",
				"etcd.extraArgs[8]":  "InitialCorruptCheck: etcdbox turns this gate on itself",
				"etcd.extraArgs[9]":  "--feature-gates already given by etcd.extraArgs[8]",
				"etcd.extraArgs[10]": `"<PEM text of 27 bytes, not shown>": want --name=value`,
				"etcd.extraArgs[11]": "… (311 bytes)\": longer than 256 bytes",
			},
		},
		{name: "long unknown flag name", yaml: "cluster: demo\netcd: {extraArgs: [--" + strings.Repeat("a", 100) + "=1]}\n" + issuing,
			want: map[string]string{"etcd.extraArgs[0]": "--" + strings.Repeat("a", 48) + "… (100 bytes): not one of the tuning flags"}},
		{name: "unknown feature gate", yaml: "cluster: demo\netcd: {extraArgs: [--feature-gates=AllAlpha=true]}\n" + issuing,
			want: map[string]string{"etcd.extraArgs[0]": `--feature-gates="AllAlpha=true": want Gate=true|false pairs, the gates among FastLeaseKeepAlive,`}},
		{name: "election timeout under 5 heartbeats", yaml: "cluster: demo\netcd: {extraArgs: [--heartbeat-interval=300]}\n" + issuing,
			want: map[string]string{"etcd.extraArgs": "--election-timeout 1000 ms: want at least 5 times --heartbeat-interval (300 ms)"}},
		{name: "election timeout too long", yaml: "cluster: demo\netcd: {extraArgs: [--election-timeout=60000]}\n" + issuing,
			want: map[string]string{"etcd.extraArgs": "--election-timeout 60000 ms: at most 50000"}},
		{name: "too many extra etcd flags", yaml: "cluster: demo\netcd:\n  extraArgs:\n" + listOf(slices.Repeat([]string{"--max-wals=5"}, 33)...) + issuing,
			want: func() map[string]string {
				m := map[string]string{"etcd.extraArgs": "33 flags: at most 32"}
				for i := 1; i < 33; i++ {
					m[fmt.Sprintf("etcd.extraArgs[%d]", i)] = "--max-wals already given by etcd.extraArgs[0]"
				}
				return m
			}()},
		{name: "caKey without caCert", yaml: "cluster: demo\n" + pkiWith("caKey", f.caKey), want: map[string]string{"pki": "caKey without caCert"}},
		{
			name: "node CA of another root, key of another CA, bad lifetime",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "nodeCACert", f.otherNodeCACert, "nodeCAKey", f.caKey) + "  leafLifetime: 10s\n",
			want: map[string]string{
				"pki.nodeCACert":   "not signed by pki.caCert",
				"pki.nodeCAKey":    "does not match",
				"pki.leafLifetime": "10s out of range 30s-9528h0m0s",
			},
		},
		{
			name: "node CA key that is not its own, and caKey too",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "nodeCACert", f.nodeCACert, "nodeCAKey", f.caKey, "caKey", f.caKey) + "  leafLifetime: soon\n",
			want: map[string]string{
				"pki.nodeCAKey":    "does not match",
				"pki":              "nodeCACert/nodeCAKey, caKey and cert/key are exclusive",
				"pki.leafLifetime": `"soon" is not a duration`,
			},
		},
		{name: "nodeCACert without its key", yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "nodeCACert", f.nodeCACert), want: map[string]string{"pki": "nodeCACert without nodeCAKey"}},
		{name: "caCert alone", yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert), want: map[string]string{"pki": "needs nodeCACert and nodeCAKey"}},
		{
			name: "cert without key",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "cert", f.cert),
			want: map[string]string{"pki": "cert without key"},
		},
		{
			name: "key without cert and caKey",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "caKey", f.caKey, "key", f.key),
			want: map[string]string{"pki": "key without cert; pki: nodeCACert/nodeCAKey, caKey and cert/key are exclusive; "},
		},
		{
			name: "bad PEM",
			yaml: "cluster: demo\npki: {caCert: nonsense, caKey: nonsense}\n",
			want: map[string]string{"pki.caCert": "no PEM block found", "pki.caKey": "no PEM block found"},
		},
		{
			name: "leaf as CA",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.cert, "caKey", f.key),
			want: map[string]string{"pki.caCert": `certificate "n1" is not a CA`},
		},
		{
			name: "CA key mismatch",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "caKey", f.key),
			want: map[string]string{"pki.caKey": "private key does not match certificate"},
		},
		{
			name: "cert from another CA",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "cert", f.otherCert, "key", f.key),
			want: map[string]string{"pki.cert": "not signed by pki.caCert", "pki.key": "private key does not match"},
		},
		{
			name: "client-only cert",
			yaml: "cluster: demo\n" + pkiWith("caCert", f.caCert, "cert", f.clientCert, "key", f.key),
			want: map[string]string{"pki.cert": "needs both server and client auth", "pki.key": "does not match"},
		},
		{
			name: "everything at once",
			yaml: "name: N1\nbogus: 1\nnetwork: {interfaces: [{name: eth0, addresses: [x]}]}\ndiscovery: {srv: a.b, peers: [{name: n1, host: h}]}\n" + pkiWith("caKey", f.caKey),
			want: map[string]string{
				"bogus":                              "unknown key",
				"cluster":                            "required",
				"name":                               `"N1" is not a valid node name`,
				"network.interfaces[0].addresses[0]": `invalid CIDR "x"`,
				"discovery":                          "srv and peers are exclusive",
				"pki":                                "caKey without caCert",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.yaml))
			require.Error(t, err, "Parse = %+v, want error", s)
			assert.Nil(t, s)
			var merr *multierror.Error
			require.ErrorAs(t, err, &merr, "error %v is not a list of problems", err)
			got := map[string]string{}
			for _, e := range merr.Errors {
				var fe *FieldError
				require.ErrorAs(t, e, &fe)
				got[fe.Path] += fe.Error() + "; "
			}
			for path, msg := range tt.want {
				assert.Contains(t, got, path, "Parse error = %v, want a problem at %s", err, path)
				assert.Contains(t, got[path], msg, "problems at %s", path)
			}
			for path := range got {
				assert.Contains(t, tt.want, path, "unexpected problem %q", got[path])
			}
			assert.NotContains(t, err.Error(), "\n", "one line for the console")
		})
	}
}

// listOf is a YAML block list of strs under a key indented by 2.
func listOf(strs ...string) string {
	var b strings.Builder
	for _, s := range strs {
		b.WriteString("    - " + strconv.Quote(s) + "\n")
	}
	return b.String()
}
