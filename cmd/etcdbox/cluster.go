package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/discovery"
	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu"
)

func init() { commands = append(commands, newClusterCmd) }

// Files in a cluster directory D.
const (
	clusterStateFile = "state.json"  // what `up` started; read by `down`
	clusterEnvFile   = "etcdctl.env" // sourced by the user for etcdctl
	clusterSeedFile  = "seed.yaml"   // the seed baked into the built image (holds the CA key)
	clusterImageFile = "etcdbox.img" // the image `up` builds when --image is not given
	clusterPKIDir    = "pki"         // pki.Init's CA and admin certificate
	clusterName      = "etcdbox"     // the seed's cluster name (etcd's initial-cluster token)
	nodeAPIPort      = discovery.DefaultAPIPort
	etcdClientPort   = discovery.DefaultClientPort
)

// clusterState is D/state.json.
type clusterState struct {
	Image string      `json:"image"`
	Nodes []nodeState `json:"nodes"`
}

// nodeState is one VM of a cluster. Dir identifies it: qemu.Attach finds
// its QEMU from there; PID and QMP are for people and scripts.
type nodeState struct {
	Name       string `json:"name"`
	Dir        string `json:"dir"`
	PID        int    `json:"pid"`
	QMP        string `json:"qmp"`
	Console    string `json:"console"`
	ClientPort int    `json:"clientPort"` // host loopback port forwarded to etcd's client port
	APIPort    int    `json:"apiPort"`    // host loopback port forwarded to the node API
}

// newClusterCmd is `etcdbox cluster`: local clusters of QEMU VMs.
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Run a local etcdbox cluster in QEMU virtual machines",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newClusterUpCmd(), newClusterDownCmd())
	return cmd
}

type upOptions struct {
	dir, image    string
	nodes, memory int
	cpus          int
	timeout       time.Duration
}

func newClusterUpCmd() *cobra.Command {
	var o upOptions
	cmd := &cobra.Command{
		Use:   "up --dir DIR",
		Short: "Boot a cluster and wait until etcd serves",
		Long: `Up boots the cluster's VMs from one image and returns once etcd answers a
linearizable read over TLS with the admin certificate.

DIR holds everything: pki/ (a CA and admin certificate, made unless
pki/ca.crt exists), the image and its seed, one directory per node (disk,
UEFI variables, console.log), state.json and etcdctl.env. Running up again
after down boots the same nodes with their data.

Without --image, up builds DIR/etcdbox.img with a seed for node n1 baked in
(the CA from DIR/pki). An --image must carry such a seed itself (etcdbox
build --seed), with the CA in DIR/pki.

The VMs keep running after up returns; stop them with etcdbox cluster down.`,
		Example: "  etcdbox cluster up --nodes 1 --dir run/\n  . run/etcdctl.env; etcdctl put k v",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clusterUp(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.dir, "dir", "", "cluster directory (created if missing)")
	fl.IntVar(&o.nodes, "nodes", 1, "number of nodes (only 1 for now)")
	fl.StringVar(&o.image, "image", "", "raw or qcow2 image to boot (default: build DIR/etcdbox.img)")
	fl.IntVar(&o.memory, "memory", 1024, "memory per node in MiB")
	fl.IntVar(&o.cpus, "cpus", 1, "virtual CPUs per node")
	fl.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long to wait for etcd to serve")
	cmd.MarkFlagRequired("dir")
	return cmd
}

func clusterUp(ctx context.Context, stdout, stderr io.Writer, o upOptions) error {
	if o.nodes != 1 {
		return fmt.Errorf("--nodes %d: only single-node clusters are supported for now", o.nodes)
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if st, err := readClusterState(dir); err == nil {
		for _, n := range st.Nodes {
			if vm, err := qemu.Attach(n.Dir); err == nil {
				return fmt.Errorf("cluster in %s is up (%s is pid %d); run etcdbox cluster down --dir %s first", dir, n.Name, vm.PID(), o.dir)
			}
		}
	}
	pkiDir := filepath.Join(dir, clusterPKIDir)
	if _, err := os.Stat(filepath.Join(pkiDir, pki.CACertFile)); errors.Is(err, fs.ErrNotExist) {
		if err := pki.Init(pkiDir, false); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "made a CA and admin certificate in %s\n", pkiDir)
	}
	img := o.image
	if img == "" {
		if img, err = ensureImage(ctx, stdout, dir, "n1"); err != nil {
			return err
		}
	}
	code, vars, err := findOVMF()
	if err != nil {
		return err
	}
	// The single node bakes its seed into the image. Issue 4's nodes share
	// one image and get their seeds on a NoCloud cidata disk each.
	vm, err := qemu.Start(ctx, qemu.Config{
		Name: "n1", Dir: filepath.Join(dir, "n1"), Image: img, Overlay: true,
		OVMFCode: code, OVMFVars: vars, MemoryMiB: o.memory, CPUs: o.cpus,
		Forwards: []qemu.Forward{{GuestPort: etcdClientPort}, {GuestPort: nodeAPIPort}},
	})
	if err != nil {
		return err
	}
	node := nodeState{
		Name: vm.Name(), Dir: vm.Dir(), PID: vm.PID(), QMP: vm.QMPPath(), Console: vm.ConsolePath(),
		ClientPort: vm.HostPort(etcdClientPort), APIPort: vm.HostPort(nodeAPIPort),
	}
	fmt.Fprintf(stdout, "%s: started (pid %d, accel %s); console %s\n", node.Name, node.PID, qemu.Accel(), node.Console)
	if err := writeClusterState(dir, clusterState{Image: img, Nodes: []nodeState{node}}); err != nil {
		return err
	}
	endpoint := "https://127.0.0.1:" + strconv.Itoa(node.ClientPort)
	if err := writeEtcdctlEnv(dir, []string{endpoint}); err != nil {
		return err
	}
	tc, err := adminTLS(pkiDir)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	if err := waitNodeReady(wctx, stdout, vm, endpoint, tc); err != nil {
		fmt.Fprintf(stderr, "%s: last console lines (%s):\n%s\n", node.Name, node.Console, vm.ConsoleTail(40))
		select {
		case <-vm.Done():
			return fmt.Errorf("%s: etcd not ready: %w", node.Name, err)
		default:
			return fmt.Errorf("%s: etcd not ready: %w; the VM keeps running for inspection, stop it with etcdbox cluster down --dir %s", node.Name, err, o.dir)
		}
	}
	fmt.Fprintf(stdout, "%s: etcd serves at %s (%s after start)\n\nUse it with:\n  . %s; etcdctl put k v\nStop it with:\n  etcdbox cluster down --dir %s\n",
		node.Name, endpoint, time.Since(start).Round(time.Second), filepath.Join(dir, clusterEnvFile), o.dir)
	return nil
}

// ensureImage returns dir's image, first building it with a seed for node
// name when it is missing.
func ensureImage(ctx context.Context, stdout io.Writer, dir, name string) (string, error) {
	img := filepath.Join(dir, clusterImageFile)
	if _, err := os.Stat(img); err == nil {
		return img, nil
	}
	seed, err := nodeSeed(filepath.Join(dir, clusterPKIDir), name)
	if err != nil {
		return "", err
	}
	seedPath := filepath.Join(dir, clusterSeedFile)
	if err := pki.WriteFileAtomic(seedPath, seed, 0o600); err != nil {
		return "", err
	}
	epoch, err := image.EpochFromEnv()
	if err != nil {
		return "", err
	}
	cfg := image.Config{Seed: seedPath, Output: img, SourceDateEpoch: epoch}
	if err := defaultInputs(&cfg); err != nil {
		return "", err
	}
	fmt.Fprintf(stdout, "building %s (seed %s baked in)\n", img, seedPath)
	if _, err := image.Build(ctx, cfg); err != nil {
		return "", fmt.Errorf("build image %s: %w", img, err)
	}
	// The image holds the CA key in its seed.
	if err := os.Chmod(img, 0o600); err != nil {
		return "", err
	}
	return img, nil
}

// nodeSeed returns the seed YAML of node name: the cluster's CA from
// pkiDir (the node issues its own leaves), defaults for everything else
// (DHCP on the first NIC, a single initial member).
func nodeSeed(pkiDir, name string) ([]byte, error) {
	caCert, err := os.ReadFile(filepath.Join(pkiDir, pki.CACertFile))
	if err != nil {
		return nil, fmt.Errorf("read seed CA: %w", err)
	}
	caKey, err := os.ReadFile(filepath.Join(pkiDir, pki.CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("read seed CA: %w", err)
	}
	s := discovery.Seed{Cluster: clusterName, Name: name, PKI: discovery.PKI{CACert: string(caCert), CAKey: string(caKey)}}
	b, err := s.Marshal()
	if err != nil {
		return nil, fmt.Errorf("seed of %s: %w", name, err)
	}
	return b, nil
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

// adminTLS is the client TLS configuration of the admin certificate.
func adminTLS(pkiDir string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, pki.AdminCertFile), filepath.Join(pkiDir, pki.AdminKeyFile))
	if err != nil {
		return nil, fmt.Errorf("load admin certificate: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(pkiDir, pki.CACertFile))
	if err != nil {
		return nil, fmt.Errorf("load cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("load cluster CA %s: no certificate", filepath.Join(pkiDir, pki.CACertFile))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// consoleMarkers are the init's console lines that up reports; a seed
// error ends the wait at once, since the node will not get further.
var consoleMarkers = []string{"etcdbox: etcd ready", "etcdbox: etcd exited", "etcdbox: fatal:", "etcdbox: seed error:"}

// waitNodeReady waits until etcd at endpoint answers a linearizable read,
// printing the VM's console markers and, now and then, the last error.
func waitNodeReady(ctx context.Context, out io.Writer, vm *qemu.VM, endpoint string, tc *tls.Config) error {
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, which ends the console watcher
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seedErr := make(chan string, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var from int64
		for {
			m, err := vm.WaitConsole(ctx, from, consoleMarkers...)
			if err != nil {
				return
			}
			fmt.Fprintf(out, "%s: console: %s\n", vm.Name(), qemu.Printable(m.Line))
			if m.Text == "etcdbox: seed error:" {
				seedErr <- qemu.Printable(m.Line)
				return
			}
			from = m.Next
		}
	}()
	start := time.Now()
	lastReport := start
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		err := probeEtcd(ctx, endpoint, tc)
		if err == nil {
			return nil
		}
		if time.Since(lastReport) >= 30*time.Second {
			fmt.Fprintf(out, "%s: waiting for etcd at %s (%s): %v\n", vm.Name(), endpoint, time.Since(start).Round(time.Second), err)
			lastReport = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last error: %v", ctx.Err(), err)
		case <-vm.Done():
			if err := vm.Wait(ctx); err != nil {
				return err
			}
			return errors.New("the VM powered off")
		case line := <-seedErr:
			return errors.New(line)
		case <-tick.C:
		}
	}
}

// probeEtcd makes one linearizable read. A fresh client per attempt keeps
// gRPC's reconnect backoff (up to two minutes) out of the boot time.
func probeEtcd(ctx context.Context, endpoint string, tc *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Get(ctx, "etcdbox/health")
	return err
}

func newClusterDownCmd() *cobra.Command {
	var (
		dir     string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "down --dir DIR",
		Short: "Power the cluster's VMs off",
		Long: `Down presses each VM's ACPI power button, so that etcd stops cleanly, and
waits up to --timeout for the VM to power off; then it stops QEMU by force.
It removes state.json and etcdctl.env and keeps the disks and the CA: up
boots the same cluster again. Remove DIR to discard it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clusterDown(cmd.Context(), cmd.OutOrStdout(), dir, timeout)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "cluster directory")
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long each VM gets to power off before it is stopped by force")
	cmd.MarkFlagRequired("dir")
	return cmd
}

func clusterDown(ctx context.Context, out io.Writer, dir string, timeout time.Duration) error {
	st, err := readClusterState(dir)
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		errs *multierror.Error
		wg   sync.WaitGroup
	)
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, a...)
	}
	for _, n := range st.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vm, err := qemu.Attach(n.Dir)
			if errors.Is(err, qemu.ErrNotRunning) {
				say("%s: not running\n", n.Name)
				return
			}
			if err == nil {
				say("%s: pressing the power button (pid %d, up to %s)\n", n.Name, vm.PID(), timeout)
				err = vm.Stop(ctx, timeout)
			}
			switch {
			case err == nil:
				say("%s: powered off\n", n.Name)
			case errors.Is(err, qemu.ErrForced):
				say("%v; console: %s\n", err, n.Console)
			default:
				mu.Lock()
				errs = multierror.Append(errs, fmt.Errorf("%s: %w", n.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errs.ErrorOrNil(); err != nil {
		return err // state stays, so down can be run again
	}
	for _, f := range []string{clusterStateFile, clusterEnvFile} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	fmt.Fprintf(out, "cluster in %s is down; disks are kept (etcdbox cluster up boots them again)\n", dir)
	return nil
}

func readClusterState(dir string) (clusterState, error) {
	var st clusterState
	p := filepath.Join(dir, clusterStateFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("no cluster in %s (%s is missing): %w", dir, clusterStateFile, err)
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read %s: %w", p, err)
	}
	return st, nil
}

func writeClusterState(dir string, st clusterState) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return pki.WriteFileAtomic(filepath.Join(dir, clusterStateFile), append(b, '\n'), 0o644)
}

// writeEtcdctlEnv writes dir/etcdctl.env for upstream etcdctl: endpoints
// and the admin certificate, as absolute paths.
func writeEtcdctlEnv(dir string, endpoints []string) error {
	p := filepath.Join(dir, clusterPKIDir)
	var b strings.Builder
	fmt.Fprintf(&b, "# etcdctl settings for the etcdbox cluster in %s; use: . %s\n", dir, filepath.Join(dir, clusterEnvFile))
	for _, kv := range [][2]string{
		{"ETCDCTL_ENDPOINTS", strings.Join(endpoints, ",")},
		{"ETCDCTL_CACERT", filepath.Join(p, pki.CACertFile)},
		{"ETCDCTL_CERT", filepath.Join(p, pki.AdminCertFile)},
		{"ETCDCTL_KEY", filepath.Join(p, pki.AdminKeyFile)},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return pki.WriteFileAtomic(filepath.Join(dir, clusterEnvFile), []byte(b.String()), 0o644)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
