package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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
