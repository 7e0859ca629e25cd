package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/bench/internal/floorpki"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// floorReady bounds a floor cluster's boot until each member serves.
const floorReady = 10 * time.Minute

// target is a running cluster the load is pointed at.
type target struct {
	name      string // "ours", "floor" or "floor-tls"
	endpoints []string
	tls       *tls.Config // nil: plain http
	pkiDir    string      // ca.crt, admin.crt and admin.key for etcdctl; "" for plain http
	upTook    time.Duration
	vms       []*qemu.VM
	down      func()
}

// pause freezes t's VMs (QMP stop): a paused VM takes no CPU, and its
// guest clock stands still, so its members see no time pass.
func (t *target) pause(ctx context.Context) error {
	for _, vm := range t.vms {
		if err := vm.Pause(ctx); err != nil {
			return fmt.Errorf("%s: pause %s: %w", t.name, vm.Name(), err)
		}
	}
	return nil
}

// resume thaws t's VMs.
func (t *target) resume(ctx context.Context) error {
	for _, vm := range t.vms {
		if err := vm.Resume(ctx); err != nil {
			return fmt.Errorf("%s: resume %s: %w", t.name, vm.Name(), err)
		}
	}
	return nil
}

// thaw resumes t's VMs for their power-off, ignoring those that run.
func (t *target) thaw() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, vm := range t.vms {
		if st, err := vm.Status(ctx); err == nil && st == "paused" {
			vm.Resume(ctx)
		}
	}
}

func (o options) ovmf() (code, vars string) {
	d := filepath.Join(o.sysroot, "usr/share/OVMF")
	return filepath.Join(d, "OVMF_CODE_4M.fd"), filepath.Join(d, "OVMF_VARS_4M.fd")
}

// upOurs brings a 3-node etcdbox cluster up with qemu/cluster, its
// network served inside this process (as the floor's is), and returns
// once the three are voting members that serve.
func (o options) upOurs(ctx context.Context, img, work, accel string, logf func(string, ...any)) (*target, error) {
	code, vars := o.ovmf()
	start := time.Now()
	c, err := cluster.Up(ctx, cluster.Config{
		Dir: filepath.Join(work, "ours"), Image: img, MemoryMiB: o.mem, CPUs: o.cpus,
		OVMFCode: code, OVMFVars: vars, Accel: accel, Log: logf,
	}, 3)
	t := &target{name: "ours"}
	stop := func() {
		t.thaw()
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.Down(dctx, time.Minute); err != nil {
			logf("ours: down: %v", err)
		}
	}
	if err != nil {
		if c != nil {
			stop()
		}
		return nil, fmt.Errorf("ours: cluster up: %w", err)
	}
	tc, err := c.TLS()
	if err != nil {
		stop()
		return nil, err
	}
	t.endpoints, t.tls, t.pkiDir, t.upTook, t.down = c.Endpoints(), tc, c.PKIDir(), time.Since(start), stop
	for _, n := range c.Nodes() {
		vm, err := c.VM(n.Name)
		if err != nil {
			stop()
			return nil, err
		}
		t.vms = append(t.vms, vm)
	}
	return t, nil
}

// upFloor boots a floor image as 3 VMs on a closed qemu/vnet network of
// their own, as qemu/cluster attaches its nodes (the same NIC, disk
// overlay, firmware and sizes), forwards a host loopback port to each
// member's client port, and returns once each serves a linearizable read.
// With ca (the CA of the seed on the image's command line) the members
// speak mutual TLS, and the bench is their client with a leaf of its own.
func (o options) upFloor(ctx context.Context, name, img, work, accel string, ca *floorpki.CA, logf func(string, ...any)) (*target, error) {
	dir := filepath.Join(work, name)
	netDir := filepath.Join(dir, "net")
	if err := os.MkdirAll(netDir, 0o755); err != nil {
		return nil, err
	}
	netLog, err := os.Create(filepath.Join(netDir, cluster.NetdLog))
	if err != nil {
		return nil, err
	}
	var logMu sync.Mutex
	hosts := make([]vnet.Host, len(floorNames))
	for i, name := range floorNames {
		hosts[i] = vnet.Host{Name: name, MAC: qemu.MAC(name, 0), IP: netip.MustParseAddr(floorIP(i))}
	}
	start := time.Now()
	n, err := vnet.New(vnet.Config{Dir: netDir, Hosts: hosts, Logf: func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(netLog, time.Now().Format(time.RFC3339)+" "+format+"\n", args...)
	}})
	if err != nil {
		netLog.Close()
		return nil, err
	}
	t := &target{name: name}
	scheme := "http"
	if ca != nil {
		scheme = "https"
		if t.tls, t.pkiDir, err = floorClient(ca, filepath.Join(dir, "pki")); err != nil {
			n.Close()
			netLog.Close()
			return nil, err
		}
	}
	t.down = func() {
		for _, vm := range t.vms {
			qctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			if err := vm.Quit(qctx); err != nil || vm.Wait(qctx) != nil {
				vm.Kill()
				vm.Wait(qctx)
			}
			cancel()
		}
		n.Close()
		netLog.Close()
	}
	code, vars := o.ovmf()
	for _, h := range hosts {
		vm, err := qemu.Start(ctx, qemu.Config{
			Name: h.Name, Dir: filepath.Join(dir, h.Name), Image: img, Overlay: true,
			OVMFCode: code, OVMFVars: vars, MemoryMiB: o.mem, CPUs: o.cpus, Accel: accel,
			Network: qemu.NetSwitch, Switch: vnet.SwitchSocket(netDir),
		})
		if err != nil {
			t.down()
			return nil, fmt.Errorf("%s: start %s: %w", name, h.Name, err)
		}
		t.vms = append(t.vms, vm)
		logf("%s: started at %s (pid %d, accel %s); console %s", h.Name, h.IP, vm.PID(), vm.Accel(), vm.ConsolePath())
		host, err := n.Forward("127.0.0.1:0", netip.AddrPortFrom(h.IP, vnet.ClientPort))
		if err != nil {
			t.down()
			return nil, err
		}
		t.endpoints = append(t.endpoints, scheme+"://"+host.String())
	}
	rctx, cancel := context.WithTimeout(ctx, floorReady)
	defer cancel()
	for i, vm := range t.vms {
		if err := waitServes(rctx, t.endpoints[i], t.tls, vm); err != nil {
			t.down()
			return nil, fmt.Errorf("%s: %s: %w", name, vm.Name(), err)
		}
	}
	t.upTook = time.Since(start)
	return t, nil
}

// floorClient issues the bench's client leaf from ca and writes it, its
// key and the CA certificate into dir as ca.crt, admin.crt and admin.key
// (for etcdctl, as an etcdbox cluster's pki directory holds them). It
// returns the client's TLS configuration, which, like etcdbox's, asks for
// TLS 1.3.
func floorClient(ca *floorpki.CA, dir string) (*tls.Config, string, error) {
	crt, key, err := ca.Issue("bench", nil)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	for name, b := range map[string][]byte{"ca.crt": ca.CertPEM(), "admin.crt": crt, "admin.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, "", err
		}
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, "", err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13}, dir, nil
}

// waitServes polls endpoint until it answers a linearizable read, or
// fails with the console's tail when the VM exits, its init gives up, or
// ctx ends.
func waitServes(ctx context.Context, endpoint string, tc *tls.Config, vm *qemu.VM) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	for {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Get(gctx, "floor/ready")
		cancel()
		if err == nil {
			return nil
		}
		if strings.Contains(vm.Console(), "floorinit: fatal:") {
			return fmt.Errorf("its init gave up:\n%s", vm.ConsoleTail(20))
		}
		select {
		case <-vm.Done():
			return fmt.Errorf("%w:\n%s", qemu.ErrExited, vm.ConsoleTail(20))
		case <-ctx.Done():
			return fmt.Errorf("no read from %s: %w\n%s", endpoint, errors.Join(ctx.Err(), err), vm.ConsoleTail(20))
		case <-time.After(500 * time.Millisecond):
		}
	}
}
