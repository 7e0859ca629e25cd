package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
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
	// etcd compacts periodically (or by revision, CompactionMode),
	// keeping this window; "" or "0" leaves compaction to the clients.
	CompactionRetention string
	CompactionMode      string // seed.CompactionPeriodic ("") or seed.CompactionRevision
	// LogLevel is the seed's etcd.logLevel: what the node keeps of
	// etcd's log (logFilter). etcd logs at info, or debug.
	LogLevel string
	// MetricsPort, when set, is etcd's plain HTTP listener for
	// /metrics and the health endpoints, on ListenIP.
	MetricsPort int
	// HTTPPort is etcd's TLS listener for its HTTP endpoints (/health,
	// /metrics, /version, the JSON gateway), on ListenIP; the client
	// port then serves gRPC alone (seed.Etcd.HTTPPort). 0, or the client
	// port, leaves both on the client port, as etcd does by default.
	HTTPPort int
	// ExtraArgs are the seed's etcd.extraArgs, validated by the seed
	// parser against its allow-list of tuning flags.
	ExtraArgs []string
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

// Args returns etcd's command line. Every client and peer listener is TLS
// with client certificate auth. The client port serves gRPC alone, and
// the HTTP port (splitHTTP) etcd's HTTP endpoints, behind the same mutual
// TLS. The one plaintext listener is the seed's etcd.metricsPort when
// set: /metrics, /health, /livez, /readyz, read-only, no keys or values.
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
		"--feature-gates=" + m.featureGates(),
		// Every client here is Go, and kube-apiserver too: TLS 1.3 costs
		// nothing, and leaves no cipher suite to choose.
		"--tls-min-version=TLS1.3",
	}
	if r := m.CompactionRetention; r != "" && r != "0" {
		args = append(args, "--auto-compaction-mode="+cmp.Or(m.CompactionMode, seed.CompactionPeriodic), "--auto-compaction-retention="+r)
	}
	if m.LogLevel == "debug" {
		args = append(args, "--log-level=debug")
	}
	if m.MetricsPort > 0 {
		args = append(args, "--listen-metrics-urls=http://"+hostPort(m.ListenIP, m.MetricsPort))
	}
	if m.splitHTTP() {
		args = append(args, "--listen-client-http-urls=https://"+hostPort(m.ListenIP, m.HTTPPort))
	}
	for _, a := range m.ExtraArgs {
		if !strings.HasPrefix(a, "--feature-gates=") { // merged above
			args = append(args, a)
		}
	}
	if m.PeerOnly {
		args = append(args, "--peer-cert-allowed-cn="+pki.PeerCommonName)
	}
	if m.QuotaBytes > 0 {
		args = append(args, "--quota-backend-bytes="+strconv.FormatInt(m.QuotaBytes, 10))
	}
	return args
}

// splitHTTP reports whether etcd serves its HTTP endpoints on a port of
// their own. On a shared port etcd hands every gRPC request through Go's
// net/http server to gRPC's ServeHTTP, which is the slow path grpc-go
// documents; alone, the client port is served by gRPC's own HTTP/2
// transport. On one CPU that doubled the puts and reads a member served;
// under emulation it took ours from 0.52-0.68x of a plain-HTTP floor to
// 0.76-1.25x at 16 and 256 clients and for reads (README, Figures). etcd
// 3.5 and later take the flag.
func (m etcdMember) splitHTTP() bool { return m.HTTPPort > 0 && m.HTTPPort != m.ClientPort }

// httpPort is the port of etcd's HTTP endpoints: the HTTP port, or the
// client port when they share it.
func (m etcdMember) httpPort() int {
	if m.splitHTTP() {
		return m.HTTPPort
	}
	return m.ClientPort
}

// tune takes the seed's etcd settings beyond ports and quota.
func (m *etcdMember) tune(e seed.Etcd) {
	m.CompactionRetention, m.CompactionMode = e.AutoCompactionRetention, e.AutoCompactionMode
	m.LogLevel, m.MetricsPort, m.ExtraArgs = e.LogLevel, e.MetricsPort, e.ExtraArgs
}

// featureGates is etcd's --feature-gates: the corruption checks, and the
// gates of the seed's extraArgs (which cannot name those two).
func (m etcdMember) featureGates() string {
	gates := corruptionChecks
	for _, a := range m.ExtraArgs {
		if g, ok := strings.CutPrefix(a, "--feature-gates="); ok {
			gates += "," + g
		}
	}
	return gates
}

// compactionNote says how etcd compacts, for the log.
func (m etcdMember) compactionNote() string {
	switch r := m.CompactionRetention; {
	case r == "" || r == "0":
		return "left to the clients"
	case m.CompactionMode == seed.CompactionRevision:
		return "by revision, keeping the last " + r + " revisions"
	default:
		return "periodic, keeping " + r + " of history"
	}
}

// tuningNote lists the seed's other etcd settings for the log, "" when
// there are none.
func (m etcdMember) tuningNote() string {
	var notes []string
	if m.LogLevel != "" {
		notes = append(notes, "log level "+m.LogLevel)
	}
	if m.MetricsPort > 0 {
		notes = append(notes, "metrics on http://"+hostPort(m.ListenIP, m.MetricsPort))
	}
	if m.splitHTTP() {
		notes = append(notes, fmt.Sprintf("gRPC alone on port %d, HTTP on %d", m.ClientPort, m.HTTPPort))
	}
	if len(m.ExtraArgs) > 0 {
		notes = append(notes, "extra flags "+strings.Join(m.ExtraArgs, " "))
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
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
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{(&url.URL{Scheme: "https", Host: m.localClientAddr()}).String()},
		TLS:         tc,
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// localClientAddr is where the init reaches the member's client listener
// (host:port): loopback, unless etcd listens on one address only.
func (m etcdMember) localClientAddr() string {
	host := "127.0.0.1"
	if m.ListenIP != "0.0.0.0" && m.ListenIP != "" && m.ListenIP != "::" {
		host = m.ListenIP
	}
	return hostPort(host, m.ClientPort)
}

// localHTTPAddr is where the init reaches the member's HTTP endpoints
// (host:port), as localClientAddr.
func (m etcdMember) localHTTPAddr() string {
	host, _, _ := net.SplitHostPort(m.localClientAddr())
	return hostPort(host, m.httpPort())
}

// ready reports whether the local member serves a linearizable read.
func ready(ctx context.Context, c *clientv3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := c.Get(ctx, "etcdbox/health")
	return err
}

// clientPorts are the ports etcd serves clients on: the client port, and
// the HTTP port when it is another.
func (m etcdMember) clientPorts() []uint16 {
	ports := []uint16{uint16(m.ClientPort)}
	if m.splitHTTP() {
		ports = append(ports, uint16(m.HTTPPort))
	}
	return ports
}
