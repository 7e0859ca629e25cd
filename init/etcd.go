package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/pki"
)

// etcdMember is what this node tells etcd about itself. It is plain data so the
// flag set can be tested without starting anything.
type etcdMember struct {
	Name    string
	Cluster string
	// Token is --initial-cluster-token: the formation's (member.Token)
	// for a bootstrap; etcd ignores it once it has data. Empty means
	// Cluster, the token of clusters formed before the handshake.
	Token         string
	DataDir       string // etcd's --data-dir
	PKIDir        string // ca.crt, server.{crt,key}, peer.{crt,key}
	ListenIP      string // "0.0.0.0" in appliance mode
	AdvertiseHost string // DNS name when there is one, else an IP
	ClientPort    int
	PeerPort      int
	// InitialCluster is name=peerURL,... ; State is "new" or "existing".
	InitialCluster string
	State          string
	// CompactionRetention is the seed's etcd.autoCompactionRetention:
	// etcd compacts periodically, keeping this window; "" or "0" leaves
	// compaction to the clients.
	CompactionRetention string
	// QuotaBytes is --quota-backend-bytes (backendQuota); 0 leaves
	// etcd's default.
	QuotaBytes int64
	// PeerOnly lets only peer leaves (pki.PeerCommonName) on the peer
	// port: set when the leaves come from a node CA, whose peer leaves
	// all carry that name. A client or admin certificate is refused there.
	PeerOnly bool
}

// corruptionChecks are etcd's feature gates that compare the members'
// data: before a member serves (InitialCorruptCheck) and, on the leader,
// the hashes at each compaction (CompactHashCheck). Both are off in
// etcd by default; a mismatch raises the CORRUPT alarm, which etcdbox
// reports and never clears by itself.
const corruptionChecks = "InitialCorruptCheck=true,CompactHashCheck=true"

func hostPort(h string, port int) string { return net.JoinHostPort(h, strconv.Itoa(port)) }

// ClientURL is the URL clients use to reach this member.
func (m etcdMember) ClientURL() string { return "https://" + hostPort(m.AdvertiseHost, m.ClientPort) }

// PeerURL is the URL peers use to reach this member.
func (m etcdMember) PeerURL() string { return "https://" + hostPort(m.AdvertiseHost, m.PeerPort) }

// Args returns etcd's command line. Every listener is TLS with client
// certificate auth: there is no plaintext listener, metrics included (etcd
// serves /metrics on the client port, behind the same mutual TLS).
func (m etcdMember) Args() []string {
	file := func(f string) string { return filepath.Join(m.PKIDir, f) }
	initial := m.InitialCluster
	if initial == "" {
		initial = m.Name + "=" + m.PeerURL()
	}
	state := m.State
	if state == "" {
		state = "new"
	}
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=https://" + hostPort(m.ListenIP, m.ClientPort),
		"--advertise-client-urls=" + m.ClientURL(),
		"--listen-peer-urls=https://" + hostPort(m.ListenIP, m.PeerPort),
		"--initial-advertise-peer-urls=" + m.PeerURL(),
		"--initial-cluster=" + initial,
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=" + cmp.Or(m.Token, m.Cluster),
		"--client-cert-auth",
		"--trusted-ca-file=" + file("ca.crt"),
		"--cert-file=" + file("server.crt"),
		"--key-file=" + file("server.key"),
		"--peer-client-cert-auth",
		"--peer-trusted-ca-file=" + file("ca.crt"),
		"--peer-cert-file=" + file("peer.crt"),
		"--peer-key-file=" + file("peer.key"),
		"--logger=zap",
		"--log-outputs=stderr",
		"--feature-gates=" + corruptionChecks,
		// Every client here is Go, and kube-apiserver too: TLS 1.3 costs
		// nothing, and leaves no cipher suite to choose.
		"--tls-min-version=TLS1.3",
	}
	if r := m.CompactionRetention; r != "" && r != "0" {
		args = append(args, "--auto-compaction-mode=periodic", "--auto-compaction-retention="+r)
	}
	if m.PeerOnly {
		args = append(args, "--peer-cert-allowed-cn="+pki.PeerCommonName)
	}
	if m.QuotaBytes > 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(m.QuotaBytes, 10))
	}
	return args
}

// hasData reports whether etcd's data dir holds a member already.
func (m etcdMember) hasData() bool {
	_, err := os.Stat(filepath.Join(m.DataDir, "member", "wal"))
	return err == nil
}

// tlsConfig is this node's client-side TLS: its server certificate (which
// carries client auth too) against the roots it trusts, both read from
// PKIDir at every handshake, so that long-lived clients (the member loop,
// the backups' election) live through a renewal and a CA rotation.
func (m etcdMember) tlsConfig() (*tls.Config, error) {
	return pki.ClientTLSFromFiles(filepath.Join(m.PKIDir, "server.crt"), filepath.Join(m.PKIDir, "server.key"), filepath.Join(m.PKIDir, "ca.crt"))
}

// client connects to the local member over its loopback client URL.
func (m etcdMember) client() (*clientv3.Client, error) {
	tc, err := m.tlsConfig()
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1"
	if m.ListenIP != "0.0.0.0" && m.ListenIP != "" && m.ListenIP != "::" {
		host = m.ListenIP
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{(&url.URL{Scheme: "https", Host: hostPort(host, m.ClientPort)}).String()},
		TLS:         tc,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// ready reports whether the local member serves a linearizable read.
func ready(ctx context.Context, c *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := c.Get(ctx, "etcdbox/health")
	return err
}
