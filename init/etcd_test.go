package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/seed"
)

func TestMemberArgsAreTLSOnly(t *testing.T) {
	m := etcdMember{
		Name: "n1", Cluster: "prod", DataDir: "/var/lib/etcdbox/etcd", PKIDir: "/pki",
		ListenIP: "0.0.0.0", AdvertiseHost: "n1.example.internal", ClientPort: 2379, PeerPort: 2380,
	}
	args := m.Args()
	flags := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	tests := []struct{ flag, want string }{
		{"listen-client-urls", "https://0.0.0.0:2379"},
		{"advertise-client-urls", "https://n1.example.internal:2379"},
		{"listen-peer-urls", "https://0.0.0.0:2380"},
		{"initial-advertise-peer-urls", "https://n1.example.internal:2380"},
		{"initial-cluster", "n1=https://n1.example.internal:2380"},
		{"initial-cluster-state", "new"},
		{"initial-cluster-token", "prod"},
		{"trusted-ca-file", "/pki/ca.crt"},
		{"peer-trusted-ca-file", "/pki/ca.crt"},
		{"cert-file", "/pki/server.crt"},
		{"peer-key-file", "/pki/peer.key"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, flags[tt.flag], "--%s", tt.flag)
	}
	for _, f := range []string{"client-cert-auth", "peer-client-cert-auth"} {
		_, ok := flags[f]
		assert.True(t, ok, "--%s missing", f)
	}
	for _, a := range args {
		assert.NotContains(t, a, "http://", "plaintext URL in %s", a)
	}
	_, metrics := flags["listen-metrics-urls"]
	assert.False(t, metrics, "no separate (plaintext) metrics listener")
}

func TestMemberArgsIPv6AndExisting(t *testing.T) {
	m := etcdMember{Name: "n2", Cluster: "c", ListenIP: "::", AdvertiseHost: "fd00::2", ClientPort: 12379, PeerPort: 12380, State: "existing",
		InitialCluster: "n1=https://[fd00::1]:12380,n2=https://[fd00::2]:12380"}
	args := strings.Join(m.Args(), " ")
	assert.Contains(t, args, "--listen-client-urls=https://[::]:12379")
	assert.Contains(t, args, "--advertise-client-urls=https://[fd00::2]:12379")
	assert.Contains(t, args, "--initial-cluster-state=existing")
	assert.Contains(t, args, "--initial-cluster=n1=https://[fd00::1]:12380,n2=https://[fd00::2]:12380")
}

func TestMemberArgsKeepTheDatabaseSmall(t *testing.T) {
	m := etcdMember{Name: "n1", Cluster: "c", ListenIP: "0.0.0.0", AdvertiseHost: "n1", ClientPort: 2379, PeerPort: 2380,
		CompactionRetention: "1h", QuotaBytes: 3 << 30}
	args := strings.Join(m.Args(), " ")
	assert.Contains(t, args, "--auto-compaction-mode=periodic --auto-compaction-retention=1h")
	assert.Contains(t, args, "--quota-backend-bytes=3221225472")
	assert.Contains(t, args, "--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true")

	// Compaction left to the clients, and etcd's default quota.
	m.CompactionRetention, m.QuotaBytes = "0", 0
	args = strings.Join(m.Args(), " ")
	assert.NotContains(t, args, "auto-compaction")
	assert.NotContains(t, args, "quota-backend-bytes")
	assert.Contains(t, args, "--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true", "the checks stay on")
	assert.Contains(t, args, "--tls-min-version=TLS1.3")
}

func TestMemberArgsTuning(t *testing.T) {
	m := etcdMember{Name: "n1", Cluster: "c", ListenIP: "0.0.0.0", AdvertiseHost: "n1", ClientPort: 2379, PeerPort: 2380}
	m.tune(seed.Etcd{AutoCompactionMode: seed.CompactionRevision, AutoCompactionRetention: "10000", LogLevel: "debug", MetricsPort: 2381,
		ExtraArgs: []string{"--max-request-bytes=65536", "--feature-gates=StopGRPCServiceOnDefrag=true", "--heartbeat-interval=200"}})
	args := m.Args()
	joined := strings.Join(args, " ")
	assert.Contains(t, joined, "--auto-compaction-mode=revision --auto-compaction-retention=10000")
	assert.Contains(t, joined, "--log-level=debug")
	assert.Contains(t, args, "--listen-metrics-urls=http://0.0.0.0:2381", "plain HTTP, on the listen address")
	assert.Contains(t, args, "--max-request-bytes=65536")
	assert.Contains(t, args, "--heartbeat-interval=200")
	gates := 0
	for _, a := range args {
		if strings.HasPrefix(a, "--feature-gates=") {
			gates++
			assert.Equal(t, "--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true,StopGRPCServiceOnDefrag=true", a, "one flag, the checks first")
		}
	}
	assert.Equal(t, 1, gates)
	assert.Equal(t, "by revision, keeping the last 10000 revisions", m.compactionNote())
	assert.Equal(t, "; log level debug; metrics on http://0.0.0.0:2381; extra flags --max-request-bytes=65536 --feature-gates=StopGRPCServiceOnDefrag=true --heartbeat-interval=200", m.tuningNote())
	// Every listener but the metrics one is still TLS.
	for _, a := range args {
		if strings.Contains(a, "http://") {
			assert.True(t, strings.HasPrefix(a, "--listen-metrics-urls="), "plaintext URL in %s", a)
		}
	}

	// Levels above info are the init's filter's, not etcd's: the init
	// reads etcd's info and warn entries.
	m.tune(seed.Etcd{LogLevel: "error"})
	joined = strings.Join(m.Args(), " ")
	assert.NotContains(t, joined, "--log-level")
	assert.NotContains(t, joined, "listen-metrics-urls")
	assert.NotContains(t, joined, "auto-compaction")
	assert.Equal(t, "left to the clients", m.compactionNote())
	m.CompactionRetention = "2h"
	assert.Equal(t, "periodic, keeping 2h of history", m.compactionNote())
	assert.Contains(t, strings.Join(m.Args(), " "), "--auto-compaction-mode=periodic --auto-compaction-retention=2h")
}

func TestLogFilter(t *testing.T) {
	lines := []string{
		`etcd: {"level":"debug","ts":"t","caller":"c","msg":"d"}` + "\n",
		`etcd: {"level":"info","ts":"t","caller":"c","msg":"starting local member"}` + "\n",
		`etcd: {"level":"warn","ts":"t","caller":"c","msg":"w"}` + "\n",
		`etcd: {"level":"error","ts":"t","caller":"c","msg":"e"}` + "\n",
		`etcd: {"level":"dpanic","ts":"t","caller":"c","msg":"p"}` + "\n",
		"etcd: panic: runtime error\n",
		`etcd: {"level":"fatal","ts":"t","caller":"c","msg":"f"}` + "\n",
	}
	tests := []struct {
		level string
		want  []int // the lines kept
	}{
		{"", []int{0, 1, 2, 3, 4, 5, 6}},
		{"debug", []int{0, 1, 2, 3, 4, 5, 6}},
		{"info", []int{0, 1, 2, 3, 4, 5, 6}}, // etcd itself drops debug
		{"warn", []int{2, 3, 4, 5, 6}},
		{"error", []int{3, 4, 5, 6}},
		{"fatal", []int{5, 6}},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		w := etcdMember{LogLevel: tt.level}.logFilter(&out)
		var want string
		for _, i := range tt.want {
			want += lines[i]
		}
		for _, l := range lines {
			n, err := w.Write([]byte(l))
			require.NoError(t, err)
			assert.Equal(t, len(l), n)
		}
		assert.Equal(t, want, out.String(), "level %q", tt.level)
	}
}
