package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// AdminTLS is a client's TLS configuration that trusts the root CAs of
// the pki directories in trust and presents the admin certificates of
// those in admins: Go's client sends the first one whose issuer the
// server names as acceptable, as a CA rotation needs.
func AdminTLS(tb testing.TB, trust []string, admins ...string) *tls.Config {
	tb.Helper()
	tc := &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS13}
	for _, d := range trust {
		ca, err := pki.LoadCAFiles(d)
		if err != nil {
			tb.Fatal(err)
		}
		tc.RootCAs.AddCert(ca.Cert)
	}
	for _, d := range admins {
		cert, err := tls.LoadX509KeyPair(filepath.Join(d, pki.AdminCertFile), filepath.Join(d, pki.AdminKeyFile))
		if err != nil {
			tb.Fatal(err)
		}
		tc.Certificates = append(tc.Certificates, cert)
	}
	return tc
}

// WithLeaf is tc presenting a new leaf of ca instead: a peer leaf when cn
// is pki.PeerCommonName. etcd's peer port checks a client leaf's
// addresses against the address it connects from: the leaf covers
// localhost, 127.0.0.1 and ips.
func WithLeaf(tb testing.TB, tc *tls.Config, ca *pki.CA, cn string, ips ...net.IP) *tls.Config {
	tb.Helper()
	ips = append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...)
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{CommonName: cn, DNSNames: []string{"localhost"}, IPs: ips, Server: true, Client: true, Validity: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		tb.Fatal(err)
	}
	out := tc.Clone()
	out.Certificates = []tls.Certificate{cert}
	return out
}

// Handshake makes one HTTPS request (GET /version) to addr with tc, so
// that a refusal of the client's certificate, which TLS 1.3 reports after
// the handshake, shows as an error. etcd answers it on its peer and HTTP
// ports, the node API with a 404: any answer is a yes. HandshakeGRPC is
// the same for a port that serves gRPC alone.
func Handshake(addr string, tc *tls.Config) error { return handshake(addr, tc, false) }

// HandshakeGRPC is Handshake over HTTP/2, which a gRPC server alone
// speaks: etcd's client port, apart from its HTTP port (seed.Etcd.HTTPPort),
// answers with a 415. (etcd's peer port offers HTTP/2 in its handshake,
// then speaks HTTP/1.1 only.)
func HandshakeGRPC(addr string, tc *tls.Config) error { return handshake(addr, tc, true) }

func handshake(addr string, tc *tls.Config, h2 bool) error {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true, ForceAttemptHTTP2: h2}}
	resp, err := hc.Get("https://" + addr + "/version")
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// Ports are a node's three TLS ports, as host:port.
type Ports struct{ Client, API, Peer string }

// Reach says which of a node's ports take a client: admin for a
// linearizable read on the client port and GET /v1/status on the node
// API, peer (a peer leaf: the peer port takes no other) for a request on
// the peer port. The client port's handshake is tried first, so that a
// refusal shows as TLS tells it rather than as clientv3's deadline.
func Reach(tb testing.TB, p Ports, admin, peer *tls.Config) map[string]error {
	tb.Helper()
	out := map[string]error{}
	err := HandshakeGRPC(p.Client, admin)
	if err == nil {
		var cli *clientv3.Client
		cli, err = clientv3.New(clientv3.Config{Endpoints: []string{"https://" + p.Client}, TLS: admin, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = cli.Get(ctx, "probe")
			cancel()
			cli.Close()
		}
	}
	out["client"] = err
	api, err := nodeapi.NewClientTLS("https://"+p.API, admin)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, out["api"] = api.Status(ctx)
	cancel()
	api.Close()
	out["peer"] = Handshake(p.Peer, peer)
	return out
}
