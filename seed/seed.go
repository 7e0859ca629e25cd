package seed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/hashicorp/go-multierror"
	"sigs.k8s.io/yaml"
)

// Defaults applied by (*Seed).ApplyDefaults.
const (
	DefaultClientPort = 2379
	DefaultPeerPort   = 2380
	DefaultAPIPort    = 9379
	// DefaultHTTPPort is where etcd serves its HTTP endpoints (/health,
	// /metrics, /version, the JSON gateway), so that the client port
	// serves gRPC alone (Etcd.HTTPPort).
	DefaultHTTPPort = 2382
)

// Seed is a node's configuration, read at boot. Field names are the YAML
// keys; sigs.k8s.io/yaml reads them from the json tags.
type Seed struct {
	// Cluster names the cluster. etcd's --initial-cluster-token is this
	// name and a hash of the forming members' nonces (member.Token).
	Cluster string `json:"cluster"`
	// Name is this node's name (etcd member name). Empty means the default
	// from DefaultNodeName.
	Name      string    `json:"name,omitempty"`
	Discovery Discovery `json:"discovery,omitzero"`
	Network   Network   `json:"network,omitzero"`
	PKI       PKI       `json:"pki,omitzero"`
	Etcd      Etcd      `json:"etcd,omitzero"`
	API       API       `json:"api,omitzero"`
	Upgrade   Upgrade   `json:"upgrade,omitzero"`
	Backup    Backup    `json:"backup,omitzero"`
	// Recovery is the operator's quorum-loss recovery directive: the
	// named survivor runs etcdbox recover's recovery by itself once its
	// quorum watch sees the quorum lost, with this one-time token, bound
	// to the cluster and member it names. Once done (or for any other
	// cluster) the directive is a no-op that says so.
	Recovery *Recovery `json:"recovery,omitempty"`
}

// Recovery is a quorum-loss recovery directive.
type Recovery struct {
	// Survivor is the node that becomes the new cluster.
	Survivor string `json:"survivor"`
	// Token is the survivor's recovery token, as etcdbox status shows it:
	// recover-<cluster ID>-<member ID>.
	Token string `json:"token"`
}

// Discovery says how a node finds its peers: DNS SRV records or a static
// list, never both.
type Discovery struct {
	// SRV is the domain whose _etcd-server-ssl._tcp records name the peers.
	SRV string `json:"srv,omitempty"`
	// SRVName is a service-name suffix, like etcd's --discovery-srv-name:
	// the records are then _etcd-server-ssl-<srvName>._tcp.<srv>.
	SRVName string `json:"srvName,omitempty"`
	// Peers is a static member list instead of SRV.
	Peers []Peer `json:"peers,omitempty"`
	// InitialSize is the number of members that bootstrap the cluster.
	// Default: len(Peers), or 1.
	InitialSize int `json:"initialSize,omitempty"`
}

// Peer is one member of a static peer list.
type Peer struct {
	Name string `json:"name"`
	// Host is an IP address or a DNS name.
	Host string `json:"host"`
	// PeerPort and ClientPort default to the seed's etcd ports.
	PeerPort   int `json:"peerPort,omitempty"`
	ClientPort int `json:"clientPort,omitempty"`
	// APIPort is the peer's node API port, which the formation handshake
	// asks before etcd starts; it defaults to the seed's api.port. Nodes
	// sharing a host (tests, one machine) need one each.
	APIPort int `json:"apiPort,omitempty"`
	// HTTPPort is the peer's etcd HTTP port (etcd.httpPort); it defaults
	// to the seed's. Nodes sharing a host need one each.
	HTTPPort int `json:"httpPort,omitempty"`
}

// Network configures the node's interfaces. Without interfaces the first
// non-loopback NIC uses DHCP.
type Network struct {
	Interfaces []Interface `json:"interfaces,omitempty"`
	// DNS lists name server addresses; Search lists search domains.
	DNS    []string `json:"dns,omitempty"`
	Search []string `json:"search,omitempty"`
}

// Interface configures one NIC, matched by kernel name or MAC address. An
// entry with neither matches the first non-loopback NIC; only a sole entry
// may omit both.
type Interface struct {
	Name string `json:"name,omitempty"`
	MAC  string `json:"mac,omitempty"`
	// DHCP asks for a DHCPv4 lease. An interface needs DHCP or Addresses.
	DHCP bool `json:"dhcp,omitempty"`
	// Addresses are static addresses with prefix length, 10.0.0.11/24;
	// after validation each parses with netip.ParsePrefix.
	Addresses []string `json:"addresses,omitempty"`
	Gateway   string   `json:"gateway,omitempty"`
	// MTU 0 keeps the driver's default.
	MTU int `json:"mtu,omitempty"`
}

// PKI holds PEM text (DESIGN §6). CACert is the trust root: the
// operator's CA, which signs admin certificates. A node issues its own
// leaves from one of:
//   - NodeCACert and NodeCAKey: the node CA, an intermediate under
//     CACert, name-constrained to the cluster (pki.IssueNodeCA); it
//     signs nothing that counts as an admin. What `etcdbox seed` makes.
//   - CAKey: the root's own key (seeds made before node CAs). Any node
//     can then mint an admin certificate; status warns.
//   - Cert and Key: a fixed leaf, used as it is and never renewed.
type PKI struct {
	CACert     string `json:"caCert,omitempty"`
	NodeCACert string `json:"nodeCACert,omitempty"`
	NodeCAKey  string `json:"nodeCAKey,omitempty"`
	CAKey      string `json:"caKey,omitempty"`
	Cert       string `json:"cert,omitempty"`
	Key        string `json:"key,omitempty"`
	// LeafLifetime is the life of the leaves a node issues itself (a
	// duration, "720h"; default 30 days). Each is renewed at two thirds
	// of its life while the node runs.
	LeafLifetime string `json:"leafLifetime,omitempty"`
}

// Leaf lifetimes.
const (
	DefaultLeafLifetime = 30 * 24 * time.Hour
	// MinLeafLifetime leaves a renewal time to happen before expiry.
	MinLeafLifetime = 30 * time.Second
	MaxLeafLifetime = 397 * 24 * time.Hour
)

// LeafLife is LeafLifetime parsed, its default when unset; a seed that
// passed validation parses.
func (k PKI) LeafLife() time.Duration {
	d, err := time.ParseDuration(k.LeafLifetime)
	if err != nil || d <= 0 {
		return DefaultLeafLifetime
	}
	return d
}

// Etcd holds etcd's listener ports and the settings that keep its
// database from filling up. The keys are named after etcd's own flags.
type Etcd struct {
	ClientPort int `json:"clientPort,omitempty"`
	PeerPort   int `json:"peerPort,omitempty"`
	// HTTPPort is where etcd serves its HTTP endpoints (/health, /livez,
	// /readyz, /metrics, /version and the JSON gateway), behind the same
	// mutual TLS as the client port (--listen-client-http-urls); default
	// DefaultHTTPPort. The client port then serves gRPC alone, through
	// gRPC's own HTTP/2 server. When both share a port, as etcd does by
	// default, etcd hands every gRPC request through Go's net/http
	// server to gRPC's ServeHTTP, which took twice the CPU per request
	// (README, Figures). Setting it to the client port brings that back,
	// for clients that expect /health or /metrics on the client port.
	HTTPPort int `json:"httpPort,omitempty"`
	// AutoCompactionMode is etcd's --auto-compaction-mode: periodic
	// (also when empty) or revision.
	AutoCompactionMode string `json:"autoCompactionMode,omitempty"`
	// AutoCompactionRetention is the history etcd keeps. Periodic: it
	// compacts periodically, keeping this window (a duration, "30m",
	// "2h"; default 1h); "0" turns etcd's own compaction off, for
	// clients that compact themselves, as kube-apiserver does. Revision:
	// it keeps this many revisions (a positive integer, required).
	// Without any compaction etcd's history grows until the quota, and
	// the NOSPACE alarm makes the cluster read-only.
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`
	// LogLevel is the least level of etcd's log that the node keeps and
	// shows (debug, info, warn, error, panic, fatal; default info). etcd
	// itself logs at info (debug for debug), since the init reads some
	// of its info and warn entries (member.RemovedWatch); the init drops
	// the lines below LogLevel.
	LogLevel string `json:"logLevel,omitempty"`
	// MetricsPort, when set, makes etcd serve /metrics, /health, /livez
	// and /readyz on plain HTTP on this port (--listen-metrics-urls),
	// on the node's listen address, for a scraper on the network (the
	// node has none of its own). Read-only, and no keys or values; the
	// HTTP port still serves them behind mutual TLS.
	MetricsPort int `json:"metricsPort,omitempty"`
	// ExtraArgs are more etcd flags, each "--name=value", from a list
	// of tuning flags (ExtraArgFlags); at most MaxExtraArgs, each at most
	// MaxExtraArgLen bytes, none twice.
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// QuotaBackendBytes caps etcd's database. Unset, each node sizes it
	// to its DATA partition: 40% of it, at most 8 GiB, so that the disk
	// keeps room for the WAL, snapshots and a defragmentation's copy.
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`
	// AutoMaintain lets the nodes clear a NOSPACE alarm by themselves, as
	// etcdbox maintain does (compact, defragment one member at a time,
	// disarm once there is headroom): the leader's node, checking every
	// minute. Off by default: then only the operator's maintain does. A
	// CORRUPT alarm is never cleared by itself.
	AutoMaintain bool `json:"autoMaintain,omitempty"`
	// KeepLeaderOnSlowDisk turns off the slow-disk handoff: by default a
	// node whose member leads and whose disk has become slow (at least
	// WAL syncs of 50 ms or more on average over 10 s) moves
	// the leadership to a voting follower whose disk keeps up.
	KeepLeaderOnSlowDisk bool `json:"keepLeaderOnSlowDisk,omitempty"`
}

// Limits of etcd's settings in the seed.
const (
	DefaultAutoCompactionRetention = "1h"
	// MinAutoCompactionRetention keeps a window that watchers can resume
	// in after a short disconnection.
	MinAutoCompactionRetention = time.Minute
	MinQuotaBackendBytes       = 64 << 20
	MaxQuotaBackendBytes       = 64 << 30
)

// Backup configures the scheduled backups: one node at a time (the
// holder of an etcd election) snapshots a member, a follower when it
// can, verifies the snapshot and keeps the newest on its DATA.
type Backup struct {
	// Interval is the time between two backups (a duration, "30m";
	// default 30m). "0" turns scheduled backups off.
	Interval string `json:"interval,omitempty"`
	// Keep is how many snapshots each node keeps (default 6).
	Keep int `json:"keep,omitempty"`
	// Push, when set, sends each scheduled backup, once verified and
	// kept, to an OCI registry as an artifact (init/backup's push.go).
	Push *BackupPush `json:"push,omitempty"`
}

// BackupPush is where backups go besides DATA: an OCI repository.
type BackupPush struct {
	// Repository is the artifacts' repository, without a tag
	// ("registry.example:5000/etcdbox/backups").
	Repository string `json:"repository"`
	// Insecure reaches the registry over plain HTTP (a registry on a
	// closed local network); every blob is still addressed by digest.
	Insecure bool `json:"insecure,omitempty"`
	// Username and Password are the registry's basic credentials; both
	// or neither. The password is never logged or echoed.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// Defaults and limits of the backup section.
const (
	DefaultBackupInterval = "30m"
	DefaultBackupKeep     = 6
	// MinBackupInterval keeps a snapshot from starting before the last
	// one is written.
	MinBackupInterval = 10 * time.Second
	MaxBackupKeep     = 100
)

// BackupInterval is the backup interval the section gives: 0 for none.
// It must have been validated.
func (b Backup) BackupInterval() time.Duration {
	switch b.Interval {
	case "0":
		return 0
	case "":
		b.Interval = DefaultBackupInterval
	}
	d, _ := time.ParseDuration(b.Interval)
	return d
}

// API configures the node API.
type API struct {
	Port int `json:"port,omitempty"`
}

// Upgrade configures the upgrade agent and the slot health gate.
type Upgrade struct {
	// Registries, when set, are the only registries (host or host:port,
	// as in an image reference) a node pulls an upgrade from; a reference
	// to any other is refused before any network traffic. Unset, any
	// registry is pulled from.
	Registries []string `json:"registries,omitempty"`
	// InsecureRegistries may be reached over plain HTTP (host:port), e.g.
	// a registry on a closed local network; every byte staged is still
	// checked against the pinned digest.
	InsecureRegistries []string `json:"insecureRegistries,omitempty"`
	// TrustedKeys, when set, are the public keys (PEM, as cosign.pub) an
	// image must be signed by (imagesig: cosign's format, beside the image
	// in its registry) before a node stages it; several may be trusted at
	// once, for a key rotation. Unset, images are not checked for a
	// signature (their digest still pins them).
	TrustedKeys []string `json:"trustedKeys,omitempty"`
	// Tries is how often systemd-boot tries a new slot before it falls
	// back (default 3).
	Tries int `json:"tries,omitempty"`
	// SettleSeconds is how long a new slot must stay healthy before it is
	// blessed (default 30); GateSeconds bounds the whole gate (default
	// 300): a slot not settled by then is marked bad and the node reboots
	// into the old one.
	SettleSeconds int `json:"settleSeconds,omitempty"`
	GateSeconds   int `json:"gateSeconds,omitempty"`
}

// Defaults of the upgrade section.
const (
	DefaultTries         = 3
	DefaultSettleSeconds = 30
	DefaultGateSeconds   = 300
)

// FieldError is one problem in a seed, at a key path such as
// network.interfaces[0].addresses[1].
type FieldError struct {
	Path    string
	Problem string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Problem }

// Parse parses a YAML (or JSON) seed strictly, validates it and applies
// the defaults. Unknown keys, wrongly typed and malformed values are all
// reported at once, as a *multierror.Error of *FieldError values that each
// name their key path; YAML syntax errors and duplicate keys come back as a
// plain error with a line number. Values that YAML reads as numbers or
// booleans are not turned into strings: `name: 1` must be quoted. A seed
// over MaxSize is refused unread (ErrTooLarge).
func Parse(data []byte) (*Seed, error) {
	if err := checkSize(len(data)); err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		// The YAML library's errors may quote the input.
		return nil, fmt.Errorf("parse seed YAML: %s", shortenQuoted(err.Error()))
	}
	var tree any
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	if err := d.Decode(&tree); err != nil {
		return nil, fmt.Errorf("parse seed: %w", err)
	}
	var shape problems
	if tree != nil { // an empty document is an empty seed
		shape.checkShape("", tree, reflect.TypeFor[Seed]())
	}
	if _, ok := tree.(map[string]any); !ok && shape.errs != nil {
		return nil, shape.err() // not even a mapping
	}
	var s Seed
	if err := json.Unmarshal(j, &s); err != nil && shape.errs == nil {
		// checkShape should have caught everything decoding rejects.
		return nil, fmt.Errorf("parse seed: %w", err)
	}
	// Validate what did decode too, so that all problems show at once, but
	// drop its complaints about keys whose values were already reported
	// (a mistyped cluster is not also "required").
	reported := shape.paths()
	if err := s.Validate(); err != nil {
		for _, e := range err.(*multierror.Error).Errors {
			if fe, ok := e.(*FieldError); !ok || !covered(fe.Path, reported) {
				shape.errs = multierror.Append(shape.errs, e)
			}
		}
	}
	if err := shape.err(); err != nil {
		return nil, err
	}
	s.ApplyDefaults()
	return &s, nil
}

// Marshal validates s and returns it as YAML that Parse reads back.
func (s *Seed) Marshal() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return yaml.Marshal(s)
}

// ApplyDefaults fills in zero ports and the initial size. The node name is
// not defaulted here; it needs the running system (DefaultNodeName).
func (s *Seed) ApplyDefaults() {
	if s.Etcd.ClientPort == 0 {
		s.Etcd.ClientPort = DefaultClientPort
	}
	if s.Etcd.PeerPort == 0 {
		s.Etcd.PeerPort = DefaultPeerPort
	}
	if s.API.Port == 0 {
		s.API.Port = DefaultAPIPort
	}
	if s.Etcd.HTTPPort == 0 {
		s.Etcd.HTTPPort = DefaultHTTPPort
	}
	for i := range s.Discovery.Peers {
		p := &s.Discovery.Peers[i]
		if p.PeerPort == 0 {
			p.PeerPort = s.Etcd.PeerPort
		}
		if p.ClientPort == 0 {
			p.ClientPort = s.Etcd.ClientPort
		}
		if p.HTTPPort == 0 {
			p.HTTPPort = s.Etcd.HTTPPort
		}
	}
	if s.Discovery.InitialSize == 0 {
		s.Discovery.InitialSize = max(len(s.Discovery.Peers), 1)
	}
	// An empty mode is periodic; revision mode has no default retention.
	if s.Etcd.AutoCompactionRetention == "" && s.Etcd.AutoCompactionMode != CompactionRevision {
		s.Etcd.AutoCompactionRetention = DefaultAutoCompactionRetention
	}
	s.Upgrade.Tries = or(s.Upgrade.Tries, DefaultTries)
	s.Upgrade.SettleSeconds = or(s.Upgrade.SettleSeconds, DefaultSettleSeconds)
	s.Upgrade.GateSeconds = or(s.Upgrade.GateSeconds, DefaultGateSeconds)
	if s.Backup.Interval == "" {
		s.Backup.Interval = DefaultBackupInterval
	}
	s.Backup.Keep = or(s.Backup.Keep, DefaultBackupKeep)
}
