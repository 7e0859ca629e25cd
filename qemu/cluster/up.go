package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// ErrUp means the cluster's VMs already run.
var ErrUp = errors.New("cluster is up")

// Up brings the cluster in cfg.Dir up and returns once it has every node
// as a voting, started member and each node answers a linearizable read
// (or ctx ends; the VMs then keep running for inspection, and the error
// says which nodes were not ready). A new directory gets nodes n1..n<nodes>;
// a directory with a cluster that is down resumes it with its nodes and
// disks (nodes must then be 0 or their number), and one where only some
// nodes are stopped boots just those (a wiped node on a fresh disk).
// ctx bounds the whole call.
func Up(ctx context.Context, cfg Config, nodes int) (*Cluster, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unlockDir, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	// The lock guards the state; it is released for the wait, so that
	// down can stop a cluster that does not come up.
	var once sync.Once
	unlock := func() { once.Do(unlockDir) }
	defer unlock()
	cfg, st, resume, err := planUp(cfg, nodes)
	if err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(dir, PKIDir)
	if made, err := ensureCA(pkiDir); err != nil {
		return nil, err
	} else if made && cfg.Log != nil {
		cfg.Log("pki: made a CA and an admin certificate in %s", pkiDir)
	}
	c, err := newCluster(cfg, st)
	if err != nil {
		return nil, err
	}
	if resume {
		c.cfg.Log("resuming the %d nodes in %s on their disks", len(st.Nodes), dir)
	}
	seedImg, err := c.ensureSeed()
	if err != nil {
		return nil, err
	}
	if err := c.joinNetwork(ctx); err != nil {
		return nil, err
	}
	var stopped []Node
	var fresh []string
	for _, n := range c.st.Nodes {
		if _, err := qemu.Attach(n.Dir); err != nil {
			stopped = append(stopped, n)
			fresh = append(fresh, n.Name)
		}
	}
	if resume && len(stopped) < len(c.st.Nodes) {
		c.cfg.Log("booting the stopped nodes: %s", strings.Join(fresh, ", "))
	}
	if err := c.boot(ctx, seedImg, stopped...); err != nil {
		return c, err
	}
	unlock()
	return c, c.WaitReady(ctx, fresh...)
}

// planUp returns what Up brings up in cfg.Dir (absolute): the state of the
// cluster there when it resumes one (cfg then takes the state's image,
// domain and sizes), else a new state of nodes nodes; with the firmware
// of cfg or of the state.
func planUp(cfg Config, nodes int) (Config, State, bool, error) {
	dir := cfg.Dir
	st, err := ReadState(dir)
	resume := err == nil && len(st.Nodes) > 0
	if err != nil && !errors.Is(err, ErrNoCluster) {
		return cfg, st, false, err
	}
	if cfg.Image != "" {
		if cfg.Image, err = filepath.Abs(cfg.Image); err != nil {
			return cfg, st, false, err
		}
	}
	if resume {
		if err := resumable(st, cfg, nodes); err != nil {
			return cfg, st, false, fmt.Errorf("cluster in %s: %w", dir, err)
		}
		cfg.Image, cfg.Domain = st.Image, st.Domain
		cfg.MemoryMiB, cfg.CPUs = orInt(cfg.MemoryMiB, st.MemoryMiB), orInt(cfg.CPUs, st.CPUs)
		cfg.DiskMiB = orInt(cfg.DiskMiB, st.DiskMiB)
		if cfg.GuestPorts == nil {
			cfg.GuestPorts = st.GuestPorts
		}
	} else {
		if nodes < 1 || nodes > maxNodes {
			return cfg, st, false, fmt.Errorf("nodes %d: want 1 to %d", nodes, maxNodes)
		}
		if cfg.Image == "" {
			return cfg, st, false, errors.New("image: missing")
		}
		src := cfg.Image
		if cfg.Image, err = pinImage(src, dir); err != nil {
			return cfg, st, false, err
		}
		if cfg.Log != nil && cfg.Image != src {
			cfg.Log("image: %s (pinned: %s, so that a rebuild of it leaves the nodes' disks alone)", src, cfg.Image)
		}
		cfg.Domain = or(cfg.Domain, DefaultDomain)
		if err := CheckSeedSource(cfg.SeedSource); err != nil {
			return cfg, st, false, err
		}
		st = State{Cluster: Name, Domain: cfg.Domain, InitialSize: nodes, SeedSource: cfg.SeedSource}
		for i := 1; i <= nodes; i++ {
			name := "n" + strconv.Itoa(i)
			st.Nodes = append(st.Nodes, Node{Name: name, Dir: filepath.Join(dir, name), IP: nodeIP(i)})
		}
	}
	cfg.OVMFCode, cfg.OVMFVars = or(cfg.OVMFCode, st.OVMFCode), or(cfg.OVMFVars, st.OVMFVars)
	if cfg.OVMFCode == "" || cfg.OVMFVars == "" {
		return cfg, st, false, errors.New("OVMF firmware: missing")
	}
	if cfg.OVMFCode, err = filepath.Abs(cfg.OVMFCode); err != nil {
		return cfg, st, false, err
	}
	if cfg.OVMFVars, err = filepath.Abs(cfg.OVMFVars); err != nil {
		return cfg, st, false, err
	}
	st.Image, st.OVMFCode, st.OVMFVars = cfg.Image, cfg.OVMFCode, cfg.OVMFVars
	st.MemoryMiB, st.CPUs = orInt(cfg.MemoryMiB, 1024), orInt(cfg.CPUs, 1)
	st.DiskMiB = orInt(cfg.DiskMiB, DefaultDiskMiB)
	st.GuestPorts = cfg.GuestPorts
	return cfg, st, resume, nil
}

// joinNetwork starts the network daemon unless it runs, registers every
// node with it (a network that stayed up knows where renumbered nodes
// moved) and saves the state.
func (c *Cluster) joinNetwork(ctx context.Context) error {
	if err := c.ensureNetwork(ctx); err != nil {
		return err
	}
	if err := c.syncIPs(ctx); err != nil {
		return err
	}
	for i := range c.st.Nodes {
		if err := c.register(ctx, &c.st.Nodes[i]); err != nil {
			return err
		}
	}
	return c.save()
}

// resumable checks that Up with cfg and nodes can resume the cluster st.
func resumable(st State, cfg Config, nodes int) error {
	running := 0
	for _, n := range st.Nodes {
		if _, err := qemu.Attach(n.Dir); err == nil {
			running++
		}
	}
	if running == len(st.Nodes) {
		return fmt.Errorf("%w: all %d nodes run", ErrUp, running)
	}
	if nodes != 0 && nodes != len(st.Nodes) {
		return fmt.Errorf("it has %d nodes, and up resumes them all: leave out the node count (asked for %d) or use another directory", len(st.Nodes), nodes)
	}
	if cfg.Image != "" && cfg.Image != st.Image && !sameFile(cfg.Image, st.Image) {
		return fmt.Errorf("its disks are overlays of %s; up resumes on that image, not %s (leave out the image)", st.Image, cfg.Image)
	}
	if cfg.SeedSource != "" && or(cfg.SeedSource, SourceNoCloud) != or(st.SeedSource, SourceNoCloud) {
		return fmt.Errorf("its nodes read their seed from %s, not %s (leave out the seed source)", or(st.SeedSource, SourceNoCloud), cfg.SeedSource)
	}
	if cfg.Domain != "" && cfg.Domain != st.Domain {
		return fmt.Errorf("its domain is %s, not %s", st.Domain, cfg.Domain)
	}
	return nil
}

// vmConfig is the QEMU configuration of node n: its only NIC on the
// cluster's switch, the seed volume as a second disk.
func (c *Cluster) vmConfig(n Node, seedImg string) qemu.Config {
	var disks []string
	switch seedSourceOf(c.st, n) {
	case SourceNoCloud:
		disks = []string{seedImg}
	case SourceConfigDrive:
		disks = []string{filepath.Join(filepath.Dir(seedImg), ConfigDriveFile)}
	}
	return qemu.Config{
		Name: n.Name, Dir: n.Dir, Image: or(n.Image, c.cfg.Image), Overlay: true,
		OVMFCode: c.cfg.OVMFCode, OVMFVars: c.cfg.OVMFVars,
		MemoryMiB: c.st.MemoryMiB, CPUs: c.st.CPUs, Accel: c.cfg.Accel,
		DiskSize: int64(c.st.DiskMiB) << 20,
		Network:  qemu.NetSwitch, Switch: vnet.SwitchSocket(c.st.Network.Dir),
		ExtraDisks: disks,
		Args:       c.cfg.QEMUArgs,
	}
}

// sameFile reports whether a and b are the same file (a hard link).
func sameFile(a, b string) bool {
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}
