//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/etcdbox/etcdbox/init/storage"
)

// runMember is the cluster mode: it prepares DATA as an etcdbox node
// does (grown to the disk's end, ext4, the same mke2fs and mount
// options), mounted on dataDir, gives the NIC the member's address, and
// execs etcd as that member of c, over plain http.
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
	return execEtcd(
		"--name="+c.self.name,
		"--data-dir="+clusterData,
		"--listen-client-urls=http://0.0.0.0:2379",
		"--advertise-client-urls=http://"+ip+":2379",
		"--listen-peer-urls=http://0.0.0.0:2380",
		"--initial-advertise-peer-urls=http://"+ip+":2380",
		"--initial-cluster="+c.initialCluster(),
		"--initial-cluster-state=new",
		"--initial-cluster-token=floor",
	)
}

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
