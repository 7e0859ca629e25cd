package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/qemu/cluster"
)

func init() { commands = append(commands, newClusterCmd) }

// clusterImageFile is the image up builds in the cluster directory when
// --image is not given.
const clusterImageFile = "etcdbox.img"

// newClusterCmd is `etcdbox cluster`: local clusters of QEMU VMs on a
// closed virtual network (package qemu/cluster does the work).
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Run a local etcdbox cluster in QEMU virtual machines",
		Long: `Cluster runs a local etcdbox cluster: QEMU VMs booted from one image on a
closed, rootless virtual network (a switch, DHCP and DNS with the cluster's
SRV records, served by a daemon of this program). The nodes find each other
by DNS SRV; loopback ports on this machine forward to each node.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newClusterUpCmd(), newClusterAddCmd(), newClusterStatusCmd(), newClusterDownCmd(), newClusterNetdCmd(), newClusterUpgradeCmd(), newClusterRotateCACmd())
	cmd.AddCommand(newFaultCmds()...)
	return cmd
}

// clusterConfig is the cluster configuration of the CLI: progress lines
// to out, the network served by this program's hidden netd verb.
func clusterConfig(dir string, out io.Writer) (cluster.Config, error) {
	exe, err := os.Executable()
	if err != nil {
		return cluster.Config{}, fmt.Errorf("find this program for the network daemon: %w", err)
	}
	return cluster.Config{
		Dir:  dir,
		Netd: []string{exe, "cluster", "netd"},
		Log:  lineLogger(out),
	}, nil
}

// lineLogger prints one line per call; goroutines may call it at once.
func lineLogger(out io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
	}
}

// findOVMF finds the UEFI firmware where build finds its inputs.
func findOVMF() (code, vars string, err error) {
	roots := sysroots()
	for _, r := range roots {
		d := filepath.Join(r, "usr", "share", "OVMF")
		code, vars = filepath.Join(d, "OVMF_CODE_4M.fd"), filepath.Join(d, "OVMF_VARS_4M.fd")
		if fileExists(code) && fileExists(vars) {
			return code, vars, nil
		}
	}
	return "", "", fmt.Errorf("OVMF firmware (usr/share/OVMF/OVMF_CODE_4M.fd) not found under %s; install ovmf or run hack/deps.sh", strings.Join(roots, ", "))
}

// usage tells how to use the cluster in dir, naming this program and
// etcdctl as they were run (bin/etcdbox, bin/etcdctl in the repository).
func usage(out io.Writer, dir string) {
	self, etcdctl := "etcdbox", "etcdctl"
	if strings.Contains(os.Args[0], "/") {
		self = os.Args[0]
		if p := filepath.Join(filepath.Dir(os.Args[0]), "etcdctl"); fileExists(p) {
			etcdctl = p
		}
	}
	fmt.Fprintf(out, `
Use it with:
  . %s; %s member list -w table
  %s cluster status --dir %s
  %s cluster add --dir %s      (one more node; it joins as a learner, then votes)
Stop it with (disks, CA and state are kept; up resumes the cluster):
  %s cluster down --dir %s
`, filepath.Join(dir, cluster.EnvFile), etcdctl, self, dir, self, dir, self, dir)
}
