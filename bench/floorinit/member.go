//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/etcdbox/etcdbox/bench/internal/floorpki"
	"github.com/etcdbox/etcdbox/init/storage"
)

// runMember is the cluster mode: it prepares DATA as an etcdbox node
// does (grown to the disk's end, ext4, the same mke2fs and mount
// options), mounted on dataDir, gives the NIC the member's address, and
// execs etcd as that member of c, over plain http or, with a CA seed,
// mutual TLS.
func runMember(h *netlink.Handle, nic netlink.Link, c clusterConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "floorinit: "+format+"\n", args...) }
	rep, err := storage.PrepareData(ctx, storage.Options{
		Target: dataDir, Tools: &storage.Tools{Run: runTool}, Logf: logf,
	})
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	logf("data: %s, ext4 of %d MiB on %s (formatted %v)", rep.Dev, rep.FSBytes>>20, dataDir, rep.Formatted)
	ip, err := configureNIC(h, nic, c.addr())
	if err != nil {
		return err
	}
	logf("exec etcd as %s on %s (cluster %s)", c.self.name, ip, c.initialCluster())
	u := func(port string) string { return c.scheme() + "://" + net.JoinHostPort(ip, port) }
	args := []string{
		"--name=" + c.self.name,
		"--data-dir=" + clusterData,
		"--listen-client-urls=" + c.scheme() + "://0.0.0.0:2379",
		"--advertise-client-urls=" + u("2379"),
		"--listen-peer-urls=" + c.scheme() + "://0.0.0.0:2380",
		"--initial-advertise-peer-urls=" + u("2380"),
		"--initial-cluster=" + c.initialCluster(),
		"--initial-cluster-state=new",
		"--initial-cluster-token=floor",
	}
	if c.tlsSeed != nil {
		more, err := tlsFlags(c, ip)
		if err != nil {
			return err
		}
		args = append(args, more...)
	}
	return execEtcd(args...)
}

// tlsFlags writes this member's CA and leaf (issued from the run's floor
// CA, for its address and for 127.0.0.1, where the bench's forwards
// arrive) under dataDir and returns etcd's flags for mutual TLS on both
// ports, as an etcdbox node sets them (init/etcd.go): client certificates
// required, TLS 1.3, and etcd's HTTP endpoints on a port of their own
// (httpPort), so that the client port serves gRPC alone. Against this
// floor the appliance's ratio is its cost beyond TLS; on a shared TLS
// port, etcd's default, gRPC goes through net/http and the floor ran at
// about half the appliance's reads (README, Figures).
func tlsFlags(c clusterConfig, ip string) ([]string, error) {
	ca, err := floorpki.New(c.tlsSeed)
	if err != nil {
		return nil, err
	}
	crt, key, err := ca.Issue(c.self.name, []net.IP{net.ParseIP(ip), net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(dataDir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM(), "node.crt": crt, "node.key": key}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	return []string{
		"--client-cert-auth", "--trusted-ca-file=" + f("ca.crt"),
		"--cert-file=" + f("node.crt"), "--key-file=" + f("node.key"),
		"--peer-client-cert-auth", "--peer-trusted-ca-file=" + f("ca.crt"),
		"--peer-cert-file=" + f("node.crt"), "--peer-key-file=" + f("node.key"),
		"--tls-min-version=TLS1.3",
		"--listen-client-http-urls=https://0.0.0.0:" + strconv.Itoa(httpPort),
	}, nil
}

// httpPort is a node's default etcd HTTP port (seed.DefaultHTTPPort; the
// floor does not link the seed package).
const httpPort = 2382

// runTool runs an e2fsprogs binary for init/storage: its combined output
// and exit code; err only when it could not run or died of a signal.
func runTool(name string, args ...string) ([]byte, int, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = []string{"PATH=/usr/sbin", "LANG=C"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() >= 0 {
		return out, ee.ExitCode(), nil
	}
	if err != nil {
		return out, -1, err
	}
	return out, 0, nil
}
