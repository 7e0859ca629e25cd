package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// maxSocketPath is the longest unix socket path Linux takes.
const maxSocketPath = 107

// netdStart bounds the network daemon's start: it serves in well under
// a second.
const netdStart = 30 * time.Second

// ServeNetwork serves a cluster's network, with its sockets in dir, until
// ctx ends or a client calls Shutdown; it logs one line per event to w.
// It is the body of `etcdbox cluster netd`, and what a Config without
// Netd runs inside the calling process.
func ServeNetwork(ctx context.Context, dir, domain string, w io.Writer) error {
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%s "+format+"\n", append([]any{time.Now().Format(time.RFC3339)}, args...)...)
	}
	logf("netd: pid %d serving %s (domain %s)", os.Getpid(), dir, domain)
	err := vnet.Serve(ctx, vnet.Config{Dir: dir, Domain: domain, Logf: logf, Started: func(n *vnet.Network) error {
		if err := serveRegistry(n, dir, logf); err != nil {
			return err
		}
		return n.ServeMetadata(&metadataServer{net: n, dir: filepath.Dir(dir)})
	}})
	if err != nil {
		logf("netd: %v", err)
	}
	return err
}

// ensureNetwork makes sure the network daemon answers, starting it when
// it does not, and records it in the state.
func (c *Cluster) ensureNetwork(ctx context.Context) error {
	dir := filepath.Join(c.cfg.Dir, NetDir)
	c.net = vnet.NewClient(dir)
	if _, err := c.net.Status(ctx); err == nil {
		c.cfg.Log("network: already up (%s)", dir)
		c.st.Network.Dir = dir
		return nil
	}
	if s := vnet.ControlSocket(dir); len(s) > maxSocketPath {
		return fmt.Errorf("cluster directory %s: the socket path %s is longer than %d bytes; use a shorter directory", c.cfg.Dir, s, maxSocketPath)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(dir, NetdLog)
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	info := NetInfo{Dir: dir, Log: logPath}
	exited := make(chan error, 1)
	if c.cfg.Netd == nil {
		go func() {
			defer logFile.Close()
			exited <- ServeNetwork(context.Background(), dir, c.cfg.Domain, logFile)
		}()
	} else {
		args := append(slices.Clone(c.cfg.Netd[1:]), "--dir", dir, "--domain", c.cfg.Domain)
		cmd := exec.Command(c.cfg.Netd[0], args...)
		cmd.Dir = dir // daemonAlive tells it from a reused pid by this
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = detached()
		err := cmd.Start()
		logFile.Close()
		if err != nil {
			return fmt.Errorf("start the network daemon: %w", err)
		}
		info.PID = cmd.Process.Pid
		go func() { exited <- cmd.Wait() }()
	}
	wctx, cancel := context.WithTimeout(ctx, netdStart)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- c.net.Wait(wctx) }()
	select {
	case err := <-waited:
		if err != nil {
			return fmt.Errorf("network daemon: %w\n%s", err, tailFile(logPath, 10))
		}
	case err := <-exited:
		cancel()
		<-waited
		return fmt.Errorf("network daemon exited (%v):\n%s", err, tailFile(logPath, 10))
	}
	c.st.Network = info
	if info.PID != 0 {
		c.cfg.Log("network: daemon pid %d serves %s (log %s)", info.PID, dir, logPath)
	} else {
		c.cfg.Log("network: serving %s in this process (log %s)", dir, logPath)
	}
	return nil
}

// register gives node n its DHCP lease and DNS records (which puts it in
// the SRV records) and forwards host loopback ports to its guest ports,
// reusing forwards the network has and asking for the node's previous
// host ports first.
func (c *Cluster) register(ctx context.Context, n *Node) error {
	n.MAC = qemu.MAC(n.Name, 0).String()
	if err := c.net.AddHost(ctx, c.host(*n)); err != nil {
		return fmt.Errorf("add host %s: %w", n.Name, err)
	}
	st, err := c.net.Status(ctx)
	if err != nil {
		return err
	}
	have := map[netip.AddrPort]netip.AddrPort{}
	for _, f := range st.Forwards {
		have[f.Guest] = f.Host
	}
	ports := map[int]int{}
	for _, gp := range append([]int{ClientPort, APIPort, HTTPPort}, c.cfg.GuestPorts...) {
		guest := netip.AddrPortFrom(n.IP, uint16(gp))
		host, ok := have[guest]
		if !ok {
			old := n.HostPort(gp)
			host, err = c.net.Forward(ctx, "127.0.0.1:"+strconv.Itoa(old), guest)
			if err != nil && old != 0 {
				host, err = c.net.Forward(ctx, "127.0.0.1:0", guest)
				if err == nil {
					c.cfg.Log("%s: host port %d is taken; port %d now forwards to %s", n.Name, old, host.Port(), guest)
				}
			}
			if err != nil {
				return fmt.Errorf("forward to %s: %w", guest, err)
			}
		}
		ports[gp] = int(host.Port())
	}
	n.ClientPort, n.APIPort = ports[ClientPort], ports[APIPort]
	delete(ports, ClientPort)
	delete(ports, APIPort)
	n.Ports = nil
	if len(ports) > 0 {
		n.Ports = ports
	}
	return nil
}

// vnetHost is a host of the network.
type vnetHost = vnet.Host

// host is node n as a host of the network: its lease, and its next one.
func (c *Cluster) host(n Node) vnet.Host {
	return vnet.Host{Name: n.Name, MAC: qemu.MAC(n.Name, 0), IP: n.IP, Next: n.NextIP}
}

// stopNetwork shuts the network daemon down; when it does not answer, it
// signals the daemon's process, if that still runs.
func (c *Cluster) stopNetwork(ctx context.Context) error {
	info := c.st.Network
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err := c.net.Shutdown(sctx)
	cancel()
	if info.PID == 0 || !daemonAlive(info.PID, info.Dir) {
		if err != nil && !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			c.cfg.Log("network: %v (its daemon is gone)", err)
		}
		return nil
	}
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			c.cfg.Log("network: daemon pid %d still runs; sending %s", info.PID, sig)
			if err := syscall.Kill(info.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("stop the network daemon (pid %d): %w", info.PID, err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if !daemonAlive(info.PID, info.Dir) {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return fmt.Errorf("network daemon (pid %d) survived SIGKILL", info.PID)
}

// tailFile returns the last n lines of a log file, for error messages.
func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	return qemu.Tail(string(b), n)
}
