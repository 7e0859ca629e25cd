package cluster

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/qemu/vnet"
	"github.com/etcdbox/etcdbox/seed"
)

// Names and ports of a local cluster.
const (
	// Name is the seed's cluster name (etcd's initial-cluster token).
	Name = "etcdbox"
	// DefaultDomain is the network's DNS domain and the seed's SRV domain.
	DefaultDomain = vnet.DefaultDomain
	// ClientPort and APIPort are the guest ports every node forwards, and
	// HTTPPort too (etcd's HTTP endpoints: the node's Ports).
	ClientPort = seed.DefaultClientPort
	APIPort    = seed.DefaultAPIPort
	HTTPPort   = seed.DefaultHTTPPort
	// DefaultDiskMiB is each node's disk, grown from the image's 1 GiB
	// (sparse: a node's disk holds what it wrote). At 1 GiB DATA was
	// 468 MiB and etcd's quota 187 MiB (40%), and with its WAL's two
	// preallocated segments nothing was left beside the room backups
	// leave etcd (the quota and 128 MiB, init/backups.go): no backup, and
	// no roll, whose steps each take a snapshot first.
	DefaultDiskMiB = 2048
)

// Files and directories in a cluster directory (see the package doc).
const (
	StateFile = "state.json"
	EnvFile   = "etcdctl.env"
	SeedFile  = "seed.img"
	// SeedYAML is the same seed as a file, the user data the metadata
	// services serve (metadata.go).
	SeedYAML = "seed.yaml"
	// ConfigDriveFile is the same seed on an OpenStack config drive, for
	// nodes whose source is SourceConfigDrive.
	ConfigDriveFile = "config-2.img"
	PKIDir          = "pki"
	NetDir          = "net"
	NetdLog         = "netd.log"
	lockFile        = ".lock"
)

// ErrNoCluster means the directory has no state.json: no cluster was
// brought up there.
var ErrNoCluster = errors.New("no cluster")

// Config says how to run a cluster's VMs. Dir is required; Up also needs
// Image and the OVMF firmware. Open fills what is empty from state.json.
type Config struct {
	// Dir is the cluster directory, created when missing.
	Dir string
	// Image is the disk image every node boots (each on a qcow2 overlay);
	// it must have no node name baked into its seed.
	Image string
	// OVMFCode and OVMFVars are the UEFI firmware and its variable store
	// template.
	OVMFCode, OVMFVars string
	// MemoryMiB and CPUs size each VM; defaults 1024 and 1.
	MemoryMiB, CPUs int
	// DiskMiB is each node's disk; default DefaultDiskMiB. A disk smaller
	// than this (the image's, or an older node's) is grown before boot,
	// as a cloud volume resize; none is shrunk.
	DiskMiB int
	// Domain is the DNS and SRV domain; default DefaultDomain.
	Domain string
	// GuestPorts are more guest ports to forward from host loopback ports
	// on every node, e.g. 9999 for the test hooks, next to ClientPort and
	// APIPort.
	GuestPorts []int
	// Netd is the command that serves the network, to which Up appends
	// "--dir <D/net> --domain <domain>"; it runs detached, in its own
	// session. Nil serves the network inside this process instead, for as
	// long as the process lives (tests).
	Netd []string
	// Accel is auto, kvm, tcg, or "" for $ETCDBOX_ACCEL, else the probe
	// (qemu.ChooseAccel); the first boot of the process resolves it.
	Accel string
	// QEMUArgs are appended to every VM's QEMU command line (tests: "-S"
	// makes a guest that never runs).
	QEMUArgs []string
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// Upgrade overrides the seed's upgrade settings (tries, settle and
	// gate seconds; zero fields keep the local defaults, see seed.go). The
	// seed is written once, by the Up or Add that creates the cluster
	// directory; later calls do not change it.
	Upgrade Upgrade
	// Backup is the seed's backup section (zero: the defaults, a backup
	// every 30 minutes); like Upgrade, written once.
	Backup seed.Backup
	// SeedSource is where the nodes read their seed from: "" or
	// SourceNoCloud for the seed volume, else cloud metadata services
	// (see SourceNoCloud). Set when the cluster is made; Add may give a
	// node another.
	SeedSource string
}

// Upgrade are the upgrade settings of a local cluster's seed
// (seed.Upgrade); a zero field keeps the default.
type Upgrade struct {
	// Tries is how often systemd-boot tries a new slot (default 3).
	Tries int
	// Settle is how long a new slot must stay healthy before it is
	// blessed, Gate how long it may take at most (defaults 15s and
	// 180s); whole seconds.
	Settle, Gate time.Duration
	// TrustedKeys are public keys (PEM) an image must be signed by before
	// a node stages it (seed.Upgrade.TrustedKeys); none: unchecked.
	TrustedKeys []string
}

// State is D/state.json: what Up and Add set up, read by the other verbs
// and by people and scripts.
type State struct {
	Cluster string `json:"cluster"`
	Domain  string `json:"domain"`
	Image   string `json:"image"`
	// InitialSize is the number of nodes that bootstrapped the cluster;
	// the seed volume says so to every node, also to those added later
	// (which find the cluster running and join it).
	InitialSize int     `json:"initialSize"`
	MemoryMiB   int     `json:"memoryMiB"`
	CPUs        int     `json:"cpus"`
	DiskMiB     int     `json:"diskMiB,omitempty"`
	GuestPorts  []int   `json:"guestPorts,omitempty"`
	OVMFCode    string  `json:"ovmfCode"`
	OVMFVars    string  `json:"ovmfVars"`
	Network     NetInfo `json:"network"`
	Nodes       []Node  `json:"nodes"`
	// SeedSource is the nodes' seed source; "" is SourceNoCloud.
	SeedSource string `json:"seedSource,omitempty"`
}

// NetInfo is the network daemon.
type NetInfo struct {
	Dir string `json:"dir"`           // its sockets: vnet.SwitchSocket, vnet.ControlSocket
	PID int    `json:"pid,omitempty"` // 0 when it runs inside the process that started it
	Log string `json:"log,omitempty"`
}

// Node is one VM of the cluster.
type Node struct {
	Name string     `json:"name"`
	Dir  string     `json:"dir"` // qemu.Attach finds the VM from here
	IP   netip.Addr `json:"ip"`
	// NextIP is the address of the node's next lease after Renumber,
	// until the node has taken it.
	NextIP  netip.Addr `json:"nextIP,omitzero"`
	MAC     string     `json:"mac"`
	PID     int        `json:"pid,omitempty"`
	QMP     string     `json:"qmp"`
	Console string     `json:"console"`
	// ClientPort and APIPort are the host loopback ports forwarded to
	// etcd's client port and to the node API.
	ClientPort int `json:"clientPort"`
	APIPort    int `json:"apiPort"`
	// Ports are the forwards of Config.GuestPorts: guest port to host port.
	Ports map[int]int `json:"ports,omitempty"`
	// Image, when set, is the image this node's disk is made from instead
	// of the cluster's (AddImage: another form of the image, a qcow2 or
	// a VMDK), pinned in the node's directory.
	Image string `json:"image,omitempty"`
	// SeedSource, when set, is where this node reads its seed from
	// instead of the cluster's source.
	SeedSource string `json:"seedSource,omitempty"`
}

// Endpoint is the node's etcd client URL on the host.
func (n Node) Endpoint() string { return "https://127.0.0.1:" + strconv.Itoa(n.ClientPort) }

// HTTPEndpoint is the base URL of the node's etcd HTTP endpoints
// (/metrics, /version) on the host: its forwarded HTTP port, or the client
// URL for a node whose state has no such forward yet.
func (n Node) HTTPEndpoint() string {
	if p := n.Ports[HTTPPort]; p != 0 {
		return "https://127.0.0.1:" + strconv.Itoa(p)
	}
	return n.Endpoint()
}

// HostPort returns the host port forwarded to guestPort, or 0.
func (n Node) HostPort(guestPort int) int {
	switch guestPort {
	case ClientPort:
		return n.ClientPort
	case APIPort:
		return n.APIPort
	}
	return n.Ports[guestPort]
}

// Cluster is a cluster directory and the VMs this process started in it.
type Cluster struct {
	cfg   Config
	accel *qemu.Choice // resolved from cfg.Accel by the first boot
	st    State
	net   *vnet.Client
	vms   map[string]*qemu.VM // started by this process; others are attached when needed
}

// Open returns the cluster whose state is in cfg.Dir, with cfg's empty
// fields taken from the state. It fails with ErrNoCluster when there is
// none.
func Open(cfg Config) (*Cluster, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	st, err := ReadState(dir)
	if err != nil {
		return nil, err
	}
	c, err := newCluster(cfg, st)
	if err != nil {
		return nil, err
	}
	c.cfg.Image = or(c.cfg.Image, st.Image)
	c.cfg.OVMFCode, c.cfg.OVMFVars = or(c.cfg.OVMFCode, st.OVMFCode), or(c.cfg.OVMFVars, st.OVMFVars)
	c.cfg.Domain = st.Domain
	c.cfg.MemoryMiB = orInt(cfg.MemoryMiB, st.MemoryMiB)
	c.cfg.CPUs = orInt(cfg.CPUs, st.CPUs)
	c.cfg.DiskMiB = orInt(cfg.DiskMiB, st.DiskMiB)
	if cfg.GuestPorts == nil {
		c.cfg.GuestPorts = st.GuestPorts
	}
	return c, nil
}

// newCluster fills in cfg's defaults.
func newCluster(cfg Config, st State) (*Cluster, error) {
	cfg.Domain = or(cfg.Domain, DefaultDomain)
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	netDir := filepath.Join(cfg.Dir, NetDir)
	c := &Cluster{cfg: cfg, st: st, net: vnet.NewClient(netDir), vms: map[string]*qemu.VM{}}
	if st.Network.Dir != "" && st.Network.Dir != netDir {
		c.net = vnet.NewClient(st.Network.Dir)
	}
	return c, nil
}

// adminTLS loads the admin certificate, at each call: a CA rotation
// changes it. While the directory holds a next CA (etcdbox pki rotate-ca)
// the harness is a client of the rotation, as an operator's tools must
// be: it trusts both roots and offers both admin certificates
// (nodeapi.RotationTLS).
func (c *Cluster) adminTLS() (*tls.Config, error) {
	next := filepath.Join(c.PKIDir(), pki.NextDir)
	if _, err := os.Stat(filepath.Join(next, pki.AdminCertFile)); err == nil {
		return nodeapi.RotationTLS(c.PKIDir(), next)
	}
	return nodeapi.AdminTLS(c.PKIDir())
}

// Dir returns the cluster directory.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Domain returns the cluster's DNS domain.
func (c *Cluster) Domain() string { return c.st.Domain }

// Nodes returns the cluster's nodes, in the order they were added.
func (c *Cluster) Nodes() []Node { return append([]Node(nil), c.st.Nodes...) }

// Node returns the node of that name.
func (c *Cluster) Node(name string) (Node, bool) {
	for _, n := range c.st.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// Endpoints returns every node's etcd client URL on the host.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, n := range c.st.Nodes {
		eps = append(eps, n.Endpoint())
	}
	return eps
}

// Network returns a client of the cluster's network daemon.
func (c *Cluster) Network() *vnet.Client { return c.net }

// TLS returns the admin certificate's client TLS configuration.
func (c *Cluster) TLS() (*tls.Config, error) {
	tc, err := c.adminTLS()
	if err != nil {
		return nil, err
	}
	return tc.Clone(), nil
}

// PKIDir returns the directory of the CA and the admin certificate.
func (c *Cluster) PKIDir() string { return filepath.Join(c.cfg.Dir, PKIDir) }

// VM returns the VM of node name: the one this process started, else the
// QEMU found running in the node's directory (qemu.ErrNotRunning when
// there is none).
func (c *Cluster) VM(name string) (*qemu.VM, error) {
	if vm, ok := c.vms[name]; ok {
		select {
		case <-vm.Done(): // it exited since; the map is left alone, since callers run in parallel
		default:
			return vm, nil
		}
	}
	n, ok := c.Node(name)
	if !ok {
		return nil, fmt.Errorf("node %s: not in the cluster in %s", name, c.cfg.Dir)
	}
	return qemu.Attach(n.Dir)
}

// ReadState reads dir/state.json; it fails with ErrNoCluster when the
// file is missing.
func ReadState(dir string) (State, error) {
	var st State
	p := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("%w in %s (%s is missing)", ErrNoCluster, dir, StateFile)
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read %s: %w", p, err)
	}
	return st, nil
}

// WriteState writes dir/state.json atomically.
func WriteState(dir string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return pki.WriteFileAtomic(filepath.Join(dir, StateFile), append(b, '\n'), 0o644)
}

// save writes the state and etcdctl.env.
func (c *Cluster) save() error {
	if err := WriteState(c.cfg.Dir, c.st); err != nil {
		return err
	}
	return WriteEnv(c.cfg.Dir, c.Endpoints())
}

// WriteEnv writes dir/etcdctl.env for upstream etcdctl: the endpoints and
// the admin certificate in dir/pki, as absolute paths; and ETCDBOX_DIR, so
// that etcdbox's commands find the cluster too, with ETCDBOX_CACERT,
// ETCDBOX_CERT and ETCDBOX_KEY for its commands given --endpoints (with
// --dir, or ETCDBOX_DIR, etcdbox reads dir/pki itself).
func WriteEnv(dir string, endpoints []string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, PKIDir)
	var b strings.Builder
	fmt.Fprintf(&b, "# etcdctl and etcdbox settings for the etcdbox cluster in %s; use: . %s\n", dir, filepath.Join(dir, EnvFile))
	for _, kv := range [][2]string{
		{"ETCDCTL_ENDPOINTS", strings.Join(endpoints, ",")},
		{"ETCDCTL_CACERT", filepath.Join(p, pki.CACertFile)},
		{"ETCDCTL_CERT", filepath.Join(p, pki.AdminCertFile)},
		{"ETCDCTL_KEY", filepath.Join(p, pki.AdminKeyFile)},
		{"ETCDBOX_DIR", dir},
		{"ETCDBOX_CACERT", filepath.Join(p, pki.CACertFile)},
		{"ETCDBOX_CERT", filepath.Join(p, pki.AdminCertFile)},
		{"ETCDBOX_KEY", filepath.Join(p, pki.AdminKeyFile)},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return pki.WriteFileAtomic(filepath.Join(dir, EnvFile), []byte(b.String()), 0o644)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// nodeIP is the address of the i-th node (1-based): 10.88.0.11, ...
func nodeIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 88, 0, byte(10 + i)}) }

// maxNodes keeps node addresses inside the /24 and below .255.
const maxNodes = 240

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
