package nodeapi

import (
	"encoding/json"
	"fmt"
	"time"
)

// DefaultPort is the node API's port when the seed sets no api.port.
const DefaultPort = 9379

// Paths of the endpoints.
const (
	PathStatus  = "/v1/status"
	PathLogs    = "/v1/logs"
	PathReboot  = "/v1/reboot"
	PathUpgrade = "/v1/upgrade"
	// PathUpgradeArm is POST only (admin): the node arms the slot it
	// holds staged (ArmRequest), so that its next boot tries it.
	PathUpgradeArm = "/v1/upgrade/arm"
	PathSnapshot   = "/v1/snapshot"
	// PathBackups lists the node's kept snapshots (GET), serves one
	// (GET ?name=NAME, the file itself) and takes one now (POST).
	PathBackups = "/v1/backups"
	// PathDecommission is POST only: the node removes its member and
	// powers off for good (DecommissionRequest, Decommissioned).
	PathDecommission = "/v1/decommission"

	// PathFormation answers the formation handshake (GET, any node
	// certificate) and takes the operator's bootstrap --without (POST,
	// admin).
	PathFormation = "/v1/formation"

	// PathRecover is POST only (admin): the survivor of a lost quorum
	// becomes the one member of a new cluster (RecoverRequest, Recovery).
	PathRecover = "/v1/recover"
	// PathRestore is POST only (admin): one step of a restore from a
	// snapshot (RestoreRequest, Recovery); PathRestoreSnapshot takes the
	// snapshot file itself (?token=, the body is the file).
	PathRestore         = "/v1/restore"
	PathRestoreSnapshot = "/v1/restore/snapshot"
)

const (
	// DefaultLogLines is how many log lines GET /v1/logs returns without
	// ?lines=.
	DefaultLogLines = 200
	// MaxLogLines caps ?lines=; larger values are cut to it.
	MaxLogLines = 100000
)

// GET /v1/logs?after=N answers complete lines only, with these headers:
// the number of the last line it holds (N when none; the next request's
// after), how many lines after N the node no longer kept, and an ID of
// the node's boot: line numbers start again when it changes.
const (
	HeaderLogLast    = "Etcdbox-Log-Last"
	HeaderLogDropped = "Etcdbox-Log-Dropped"
	HeaderLogBoot    = "Etcdbox-Log-Boot"
)

// Status is a node's answer to GET /v1/status. A field the node cannot tell
// (etcd not running yet, say) is left at its zero value; the request still
// succeeds.
type Status struct {
	// Name is the node's name, Cluster the seed's cluster name.
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	// SeedSource is where the node's seed came from: "cmdline",
	// "nocloud", "openstack-drive", "ec2", "gce", "azure", "openstack"
	// (the cloud metadata), "image" (baked), "file" (container mode), or
	// "cache" (state/, when no source had one). Empty from a node that
	// does not tell.
	SeedSource string `json:"seedSource,omitempty"`
	// Version is the image version (version= in /etc/etcdbox/release),
	// EtcdVersion the etcd server's (etcd= there, or what etcd reports),
	// Kernel the running kernel's release.
	Version     string `json:"version"`
	EtcdVersion string `json:"etcdVersion"`
	Kernel      string `json:"kernel"`
	// Slot is the booted slot ("a" or "b"; empty in container mode) and
	// Blessed whether its boot entry has passed the health gate.
	Slot    string `json:"slot"`
	Blessed bool   `json:"blessed"`
	// Slots describes every slot on the ESP, in name order.
	Slots  []Slot `json:"slots"`
	Member Member `json:"member"`
	// CertExpiry is the nearest NotAfter of the node's certificates: its
	// server and peer leaves and the node CA that issues them.
	CertExpiry time.Time `json:"certExpiry"`
	// PKI says how the node's certificates are issued, and warns.
	PKI PKI `json:"pki,omitzero"`
	// Uptime is the time since the init started. On the wire it is a Go
	// duration string such as "26h3m12s".
	Uptime  time.Duration   `json:"-"`
	Upgrade UpgradeProgress `json:"upgrade"`
	// LastRollback says why the slot that is not booted was rolled back
	// ("slot b: gate failed: not a voting member after 120s"), as the init
	// recorded it on the ESP when it gave the slot up; empty when that
	// slot is not bad. A slot given up without a record (a kernel panic,
	// say) reads "slot b: bad, no reason recorded".
	LastRollback string `json:"lastRollback,omitempty"`
	// Backups is the cluster's backup schedule as this node sees it.
	Backups BackupSchedule `json:"backups,omitzero"`
	// Quorum is what the node's quorum watch sees: whether its member
	// has lost the cluster's quorum, since when, and who answers.
	Quorum Quorum `json:"quorum,omitzero"`
	// Recovery is the node's last quorum-loss recovery (etcdbox recover),
	// zero when it never was a survivor.
	Recovery Recovery `json:"recovery,omitzero"`
	// Storage is what DATA holds and has free, and etcd's database
	// against its quota; zero from a node that does not tell.
	Storage Storage `json:"storage,omitzero"`
	// Watchdog is the hardware watchdog the init feeds, and its timeout:
	// "/dev/watchdog (iTCO_wdt), timeout 30s". WatchdogNone on a machine
	// where the init found none, so that a hang is never reset; empty in
	// container mode and from a node that does not tell.
	Watchdog string `json:"watchdog,omitempty"`
}

// WatchdogNone is Status.Watchdog on a machine without a hardware
// watchdog the init could arm.
const WatchdogNone = "none"

// Storage is a node's DATA and its member's database, in bytes.
type Storage struct {
	// DataBytes is the size of DATA's filesystem, DataFree what it has
	// free for etcd and the init (not counting the blocks reserved for
	// root).
	DataBytes int64 `json:"dataBytes"`
	DataFree  int64 `json:"dataFree"`
	// Backups is what the backups kept on this node take.
	Backups int64 `json:"backups,omitempty"`
	// Quota is the database quota etcd runs with; zero before etcd's
	// settings are worked out.
	Quota int64 `json:"quota,omitempty"`
	// DBSize is the size of etcd's database file and DBInUse what of it
	// holds data (a defragmentation shrinks the file to about that), as
	// etcd reports them; zero while etcd does not answer. etcd raises
	// NOSPACE when DBSize reaches Quota.
	DBSize  int64 `json:"dbSize,omitempty"`
	DBInUse int64 `json:"dbInUse,omitempty"`
}

// WALRoom is what etcd's WAL may need on DATA beside the database: two of
// its 64 MiB segments (it preallocates the next one).
const WALRoom = 128 << 20

// Low reports whether DATA has less free than the database may still grow
// before its quota stops it (grow) plus WALRoom: the disk would then fill
// before etcd raises NOSPACE, and etcd stops on a failed write. It is
// false when s does not tell the sizes.
func (s Storage) Low() (grow int64, low bool) {
	if s.DataBytes <= 0 || s.Quota <= 0 || s.DBSize <= 0 {
		return 0, false
	}
	grow = max(s.Quota-s.DBSize, 0)
	return grow, s.DataFree < grow+WALRoom
}

// Quorum is a voting member's view of its cluster's quorum.
type Quorum struct {
	// Lost: the member has served no linearizable read for longer than
	// the watch's bound, while etcd runs.
	Lost bool `json:"lost"`
	// Since is when the member last served one (or etcd started).
	Since time.Time `json:"since,omitzero"`
	// Answering and Silent are the cluster's members by name, those whose
	// etcd answers a status request and those whose etcd does not.
	Answering []string `json:"answering,omitempty"`
	Silent    []string `json:"silent,omitempty"`
	// Command is what an operator runs once the silent members are known
	// to be gone for good.
	Command string `json:"command,omitempty"`
}

// Recovery phases, in order (RecoverRequest).
const (
	// RecoveryFenced: the survivor's etcd is stopped and stays stopped.
	RecoveryFenced = "fenced"
	// RecoverySaved: the survivor's database is copied into state/ and
	// verified; it is kept there for good.
	RecoverySaved = "saved"
	// RecoveryRestored: the old data dir is moved aside and the copy is
	// restored as the one member of a new cluster (a new cluster ID).
	RecoveryRestored = "restored"
	// RecoveryDone: the new cluster's member serves as a voter.
	RecoveryDone = "done"
)

// RecoverRequest is the body of POST /v1/recover. Token is the one-time
// token of the recovery, RecoveryToken of the survivor's old cluster and
// member: a request is bound to the cluster it recovers from.
type RecoverRequest struct {
	Survivor string `json:"survivor"`
	Token    string `json:"token"`
	// Rejoin asks a node other than the survivor, whose data is a member
	// of the cluster the token recovered from, to move that data aside
	// and join the survivor's new cluster as a learner.
	Rejoin bool `json:"rejoin,omitempty"`
}

// Restore steps (RestoreRequest.Step), in the order the CLI takes them:
// every node is fenced, the snapshot is sent to the seed node, the seed
// restores it, then the others move their data aside and join.
const (
	RestoreFence  = "fence"
	RestoreSeed   = "seed"
	RestoreRejoin = "rejoin"
)

// RestoreRequest is the body of POST /v1/restore. Token is
// RestoreToken of the snapshot's SHA-256, which the node checks the file
// it gets against.
type RestoreRequest struct {
	Token string `json:"token"`
	Step  string `json:"step"`
}

// RestoreToken is the one-time token of a restore of the snapshot whose
// SHA-256 (the one etcd appends, hex) is sha256: the same command gives
// the same token, so a repeat resumes or finds the restore done.
func RestoreToken(sha256 string) string { return "restore-" + sha256 }

// Recovery ops.
const (
	OpRecover = "recover"
	OpRestore = "restore"
)

// Recovery is the state of a quorum-loss recovery (on its survivor) or of
// a restore from a snapshot (on every node).
type Recovery struct {
	// Op is OpRecover or OpRestore ("" in records of the first
	// recoveries: OpRecover); Role, for a restore, RestoreSeed or
	// RestoreRejoin once the node knows.
	Op    string `json:"op,omitempty"`
	Role  string `json:"role,omitempty"`
	Token string `json:"token"`
	Phase string `json:"phase"`
	// From and To are the old and new cluster IDs (hex; To is empty
	// until the new member has served).
	From string `json:"from"`
	To   string `json:"to,omitempty"`
	// Snapshot is the kept copy of the survivor's database, Aside where
	// its old data dir went (paths on the node's DATA).
	Snapshot string `json:"snapshot,omitempty"`
	Aside    string `json:"aside,omitempty"`
	// Revision is the database's revision before the recovery; the new
	// cluster starts Bump above it.
	Revision int64     `json:"revision,omitempty"`
	Bump     int64     `json:"bump,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Updated  time.Time `json:"updated,omitzero"`
	// NoOp says the request changed nothing, and Message why (a replay
	// of a finished recovery, say).
	NoOp    bool   `json:"noOp,omitempty"`
	Message string `json:"message,omitempty"`
}

// RecoveryToken is the one-time token of a recovery of the cluster
// clusterID from its member memberID (both hex, as Member reports them):
// the same command gives the same token, so a repeat resumes an
// interrupted recovery or finds it done, and a new cluster gives a new one.
func RecoveryToken(clusterID, memberID string) string {
	return "recover-" + clusterID + "-" + memberID
}

// BackupSchedule is the cluster's scheduled backups (the seed's backup
// section): how often, and the last one, as etcd records it.
type BackupSchedule struct {
	// Interval is the seed's backup.interval; 0 when none are scheduled.
	Interval time.Duration `json:"interval"`
	// Last is the last backup taken: on which node, of which member, its
	// name, revision and time. Zero when none was taken yet.
	LastNode   string    `json:"lastNode,omitempty"`
	LastName   string    `json:"lastName,omitempty"`
	LastMember string    `json:"lastMember,omitempty"`
	LastTaken  time.Time `json:"lastTaken,omitzero"`
	// Failed is why the last try failed, when it came after the last
	// backup taken: on which node, when, and the error (a full DATA, no
	// member to snapshot). Empty once a backup is taken again.
	FailedNode string    `json:"failedNode,omitempty"`
	FailedAt   time.Time `json:"failedAt,omitzero"`
	Failed     string    `json:"failed,omitempty"`
}

// statusWire is Status with Uptime in a form that reads well in curl.
type statusWire struct {
	statusFields
	Uptime string `json:"uptime"`
}

// statusFields is Status without its methods, so that statusWire does not
// inherit MarshalJSON.
type statusFields Status

// MarshalJSON writes Uptime as a duration string, whole seconds.
func (s Status) MarshalJSON() ([]byte, error) {
	return json.Marshal(statusWire{statusFields(s), s.Uptime.Round(time.Second).String()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Status) UnmarshalJSON(b []byte) error {
	var w statusWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = Status(w.statusFields)
	if w.Uptime != "" {
		d, err := time.ParseDuration(w.Uptime)
		if err != nil {
			return fmt.Errorf("uptime: %w", err)
		}
		s.Uptime = d
	}
	return nil
}

// Slot states. A staged slot is SlotTrying until the gate blesses it or
// marks it bad. A slot staged ahead of its turn is SlotHeld: complete,
// but no boot tries it until it is armed (POST /v1/upgrade/arm).
const (
	SlotEmpty   = "empty"
	SlotHeld    = "held"
	SlotTrying  = "trying"
	SlotBlessed = "blessed"
	SlotBad     = "bad"
)

// Slot is one A/B slot as its boot entry describes it.
type Slot struct {
	// Name is "a" or "b".
	Name string `json:"name"`
	// Generation is the entry's version field; the highest bootable one
	// boots first.
	Generation int `json:"generation"`
	// State is one of SlotEmpty, SlotHeld, SlotTrying, SlotBlessed,
	// SlotBad.
	State string `json:"state"`
	// TriesLeft is the entry's boot counter while State is SlotTrying
	// or SlotHeld.
	TriesLeft int `json:"triesLeft,omitempty"`
}

// Role is a node's place in the etcd cluster.
type Role string

// Roles.
const (
	RoleVoter   Role = "voter"
	RoleLearner Role = "learner"
	// RoleNone means the node is not (yet) a member, or etcd does not answer.
	RoleNone Role = "none"
)

// Member is what the node's etcd says about itself.
type Member struct {
	// ID and ClusterID are hexadecimal, as etcdctl prints them; empty when
	// unknown.
	ID        string `json:"id"`
	ClusterID string `json:"clusterID"`
	Role      Role   `json:"role"`
	Leader    bool   `json:"leader"`
	// Healthy means etcd answers a linearizable read through this member.
	Healthy bool `json:"healthy"`
	// Alarms are the cluster's raised alarms as this member's status
	// lists them, in etcd's words ("memberID:... alarm:NOSPACE"). NOSPACE
	// leaves the cluster accepting only reads and deletes (etcdbox
	// maintain); CORRUPT is never cleared by itself.
	Alarms []string `json:"alarms,omitempty"`
	// ClusterVersion is etcd's cluster version ("3.7.0") as this member's
	// /version says it; empty when it cannot tell, or from a node that
	// does not report it.
	ClusterVersion string `json:"clusterVersion,omitempty"`
}

// Upgrade phases, in order; PhaseFailed can follow any of the working ones.
const (
	PhaseIdle    = "idle"
	PhasePulling = "pulling"
	PhaseWriting = "writing"
	// PhaseHeld means the inactive slot holds the target, complete and
	// verified, but held: no boot tries it until it is armed.
	PhaseHeld = "held"
	// PhaseStaged means the inactive slot holds the target and its entry
	// (with a try counter) sorts first: the next boot tries it.
	PhaseStaged = "staged"
	PhaseFailed = "failed"
)

// UpgradeProgress is the node's upgrade agent state, GET /v1/upgrade.
type UpgradeProgress struct {
	// Target is the image reference being staged or last staged.
	Target string `json:"target,omitempty"`
	// Phase is one of the Phase constants; empty means PhaseIdle.
	Phase string `json:"phase"`
	// Error says why Phase is PhaseFailed.
	Error string `json:"error,omitempty"`
	// Updated is when Phase last changed.
	Updated time.Time `json:"updated,omitzero"`
}

// UpgradeRequest is the body of POST /v1/upgrade.
type UpgradeRequest struct {
	// Image is an OCI image reference pinned by digest; see CheckImageRef.
	Image string `json:"image"`
	// Hold stages the image held (PhaseHeld): the slot does not boot
	// until POST /v1/upgrade/arm. Without it the staged slot is armed at
	// once. Staging the digest the inactive slot already holds (held or
	// armed, never booted) rewrites nothing; it only holds or arms it.
	Hold bool `json:"hold,omitempty"`
}

// ArmRequest is the body of POST /v1/upgrade/arm: Image must be the image
// the inactive slot holds, so that a node never arms what the caller did
// not mean.
type ArmRequest struct {
	Image string `json:"image"`
}

// HeaderSnapshotSHA256 carries, on a snapshot served by GET /v1/backups,
// the SHA-256 etcd appended to it (hex), which the client checks.
const HeaderSnapshotSHA256 = "Etcdbox-Snapshot-Sha256"

// Snapshot is an etcd snapshot a node keeps on DATA: the answer to
// POST /v1/snapshot, and each entry of GET /v1/backups. It was verified
// before it was kept: the SHA-256 etcd appends, and its database read
// whole (Revision, Keys and Hash are what etcdutl snapshot status says
// of it). The node keeps the newest of the seed's backup.keep.
type Snapshot struct {
	// Name is its file name, which GET /v1/backups/{name} serves; Path
	// the file on the node, under DATA's backups directory.
	Name string `json:"name"`
	Path string `json:"path"`
	// Member is the name of the member it was taken from.
	Member string `json:"member,omitempty"`
	// Pushed is the backup's reference by digest in the seed's registry
	// (backup.push), when the node pushed it.
	Pushed   string    `json:"pushed,omitempty"`
	Size     int64     `json:"size"`
	Revision int64     `json:"revision"`
	Keys     int       `json:"keys"`
	Hash     uint32    `json:"hash"`
	SHA256   string    `json:"sha256"`
	Taken    time.Time `json:"taken"`
}

// RebootRequest is the optional body of POST /v1/reboot.
type RebootRequest struct {
	// NoKexec makes the reboot go through the firmware. Without it, a
	// node whose next boot is a freshly armed slot jumps into it with
	// kexec, counting the try on its ESP as systemd-boot would (DESIGN
	// §7); every other reboot goes through the firmware anyway.
	NoKexec bool `json:"noKexec,omitempty"`
}

// Accepted is the body of a 202 answer.
type Accepted struct {
	Message string `json:"message"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error string `json:"error"`
}

// DecommissionRequest is the body of POST /v1/decommission.
type DecommissionRequest struct {
	// Node is the name of the node asked, so that a request sent to the
	// wrong address is refused. Required.
	Node string `json:"node"`
	// Reason is recorded in the node's tombstone and logged.
	Reason string `json:"reason,omitempty"`
}

// Decommissioned is the answer to POST /v1/decommission, sent once the
// member is removed and the tombstone written; the node then stops etcd
// and powers off. A node with a tombstone never joins the cluster again
// by itself: to bring it back, wipe its DATA (it joins as a new member).
type Decommissioned struct {
	Node     string `json:"node"`
	MemberID string `json:"memberID"`
	Reason   string `json:"reason"`
	// Tombstone is the file on the node that keeps it out of the cluster.
	Tombstone string    `json:"tombstone"`
	At        time.Time `json:"at"`
}

// Formation is a node's answer to GET /v1/formation: what the formation
// handshake (DESIGN §5) needs from every expected initial member before
// any of them starts etcd with --initial-cluster-state=new. The node
// serves it before it starts etcd, and keeps serving it after.
type Formation struct {
	// Name is the node's name, Cluster the seed's cluster name.
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	// HasData: the node's etcd data dir holds a member.
	HasData bool `json:"hasData"`
	// WasMember: the node's state says it has been a voting member.
	WasMember bool `json:"wasMember"`
	// Nonce is the node's formation nonce: random, made once and written
	// to its state before it was first served, so it is stable across
	// reboots and changes only when the state is lost.
	Nonce string `json:"nonce"`
	// Started: the node committed to a formation (Token) and started etcd
	// with --initial-cluster-state=new at least once.
	Started bool `json:"started"`
	// Token is that formation's --initial-cluster-token, Nonces the
	// nonces it was made of, by member name; empty when not Started.
	Token  string            `json:"token,omitempty"`
	Nonces map[string]string `json:"nonces,omitempty"`
	// Without names the expected initial members the operator told this
	// node to form the cluster without (etcdbox bootstrap --without).
	Without []string `json:"without,omitempty"`
}

// FormationRequest is the body of POST /v1/formation.
type FormationRequest struct {
	// Without names the expected initial members to form the cluster
	// without. The node refuses once it has started a formation.
	Without []string `json:"without"`
}
