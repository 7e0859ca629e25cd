package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/init/power"
	"github.com/etcdbox/etcdbox/init/recovery"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/upgrade"
	"github.com/etcdbox/etcdbox/internal/etcdhttp"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/nodeapi/server"
	"github.com/etcdbox/etcdbox/seed"
	"golang.org/x/sys/unix"
)

// serveAPI starts the node API on the seed's api.port (DESIGN §8).
func (n *node) serveAPI(context.Context) error {
	srv, err := server.New(server.Config{PKIDir: n.pkiDir(), Node: &apiNode{n: n, agent: n.upgradeAgent()}, Log: n.limited.Printf})
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(n.listenIP, strconv.Itoa(n.seed.API.Port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("node API: %w", err)
	}
	n.api = srv
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Printf("node API: %v", err)
		}
	}()
	n.log.Printf("node API on https://%s", addr)
	return nil
}

// apiNode answers the node API for the init.
type apiNode struct {
	n     *node
	agent *upgrade.Agent
}

// release reads /etc/etcdbox/release (key=value lines).
func release() map[string]string {
	out := map[string]string{}
	b, _ := os.ReadFile("/etc/etcdbox/release")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}

func (a *apiNode) Status(ctx context.Context) (nodeapi.Status, error) {
	n := a.n
	rel := release()
	st := nodeapi.Status{
		Name:        n.name,
		Version:     rel["version"],
		EtcdVersion: rel["etcd"],
		Slot:        n.bootedSlot(),
		Uptime:      time.Since(n.start),
	}
	if !n.container {
		switch w := n.dog.(type) {
		case nil:
			st.Watchdog = nodeapi.WatchdogNone
		case *power.Watchdog:
			st.Watchdog = w.Describe()
		default: // a stand-in of the init's tests
			st.Watchdog = "armed"
		}
	}
	if n.seed != nil {
		st.Cluster, st.SeedSource = n.seed.Cluster, n.seedSource
		st.Backups.Interval = n.seed.Backup.BackupInterval()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		st.Kernel = string(bytes.TrimRight(u.Release[:], "\x00"))
	}
	if n.esp != "" {
		if ss, err := slot.Read(n.esp); err == nil {
			for _, name := range []string{"a", "b"} {
				s := ss.Slots[name]
				out := nodeapi.Slot{Name: name, State: slotState(s)}
				if e := s.Entry; e != nil || s.Held != nil {
					if e == nil {
						e = s.Held
					}
					out.Generation = e.Generation
					out.TriesLeft = e.Name.Left
				}
				st.Slots = append(st.Slots, out)
				if name == st.Slot {
					st.Blessed = s.Status() == slot.Blessed
				}
			}
			st.LastRollback = slot.LastRollback(n.esp, ss, st.Slot)
		}
	}
	st.PKI, st.CertExpiry = n.pkiStatus()
	st.Member.Role = nodeapi.RoleNone
	// The member this node last ran as a voter, until etcd says more.
	st.Member.ClusterID, st.Member.ID = n.identity()
	st.Quorum = n.quorumState()
	if rec, err := recovery.Load(n.recoveryFile()); err == nil {
		st.Recovery = rec
	}
	st.Storage = n.storageStatus()
	if n.supervisor() != nil {
		if c, err := n.localMember().client(); err == nil {
			defer c.Close()
			sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if s, err := c.Status(sctx, c.Endpoints()[0]); err == nil {
				st.EtcdVersion = s.Version
				st.Member.ID = fmt.Sprintf("%x", s.Header.MemberId)
				st.Member.ClusterID = fmt.Sprintf("%x", s.Header.ClusterId)
				st.Member.Leader = s.Leader == s.Header.MemberId
				st.Member.Role = nodeapi.RoleVoter
				if s.IsLearner {
					st.Member.Role = nodeapi.RoleLearner
				}
				st.Member.Alarms = s.Errors
				st.Storage = withEtcdStatus(st.Storage, s)
				st.Member.Healthy = ready(sctx, c) == nil
				// Its own deadline: the reads above may have spent sctx's
				// under emulation, and the roll falls back on this field.
				if tc, err := n.localMember().tlsConfig(); err == nil {
					vctx, vcancel := context.WithTimeout(ctx, 3*time.Second)
					st.Member.ClusterVersion, _ = etcdhttp.ClusterVersion(vctx, tc, "https://"+n.localMember().localHTTPAddr())
					vcancel()
				}
				if last, err := readLastBackup(sctx, c); err == nil {
					st.Backups.LastNode, st.Backups.LastName, st.Backups.LastMember, st.Backups.LastTaken = last.Node, last.Name, last.Member, last.Taken
					st.Backups.FailedNode, st.Backups.FailedAt, st.Backups.Failed = last.FailedNode, last.FailedAt, last.Failed
				}
			}
		}
	}
	return st, nil
}

// storageStatus is what DATA holds and has free, the kept backups and the
// quota this node gave etcd (0: etcd's default); Status adds what etcd
// says of its database.
func (n *node) storageStatus() nodeapi.Storage {
	var out nodeapi.Storage
	var fs unix.Statfs_t
	if unix.Statfs(n.root, &fs) == nil {
		out.DataBytes = int64(fs.Blocks) * int64(fs.Bsize)
		out.DataFree = int64(fs.Bavail) * int64(fs.Bsize)
	}
	if kept, err := backup.List(n.backupsDir()); err == nil {
		for _, k := range kept {
			out.Backups += k.Size
		}
	}
	if m := n.localMember(); m.DataDir != "" {
		out.Quota = m.QuotaBytes
		if out.Quota == 0 {
			out.Quota = etcdDefaultQuota
		}
	}
	return out
}

func slotState(s slot.Slot) string {
	switch s.Status() {
	case slot.Blessed:
		return nodeapi.SlotBlessed
	case slot.Trying:
		return nodeapi.SlotTrying
	case slot.Bad:
		return nodeapi.SlotBad
	}
	if s.Held != nil {
		return nodeapi.SlotHeld
	}
	return nodeapi.SlotEmpty
}

func (a *apiNode) LogsSince(seq uint64) ([]string, uint64, uint64) {
	return a.n.ring.Since(seq, 0)
}

func (a *apiNode) Logs(lines int) []string {
	all := a.n.ring.Lines()
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return all
}

func (a *apiNode) Reboot(req nodeapi.RebootRequest) error {
	why := "reboot requested through the node API"
	if req.NoKexec {
		why += " (no kexec)"
	}
	a.n.request(shutdownRequest{why: why, reboot: true, noKexec: req.NoKexec})
	return nil
}

// backupsDir is where snapshots are kept, on DATA next to etcd's data.
func (n *node) backupsDir() string { return backup.Dir(n.root) }

// backupKeep is how many snapshots the node keeps (the seed's backup.keep).
func (n *node) backupKeep() int {
	if n.seed == nil || n.seed.Backup.Keep == 0 {
		return seed.DefaultBackupKeep
	}
	return n.seed.Backup.Keep
}

// apiSnapshot is s as the node API shows it.
func apiSnapshot(s backup.Snapshot) nodeapi.Snapshot {
	return nodeapi.Snapshot{Name: s.Name, Path: s.Path, Member: s.Member, Pushed: s.Pushed, Size: s.Size, Revision: s.Revision,
		Keys: s.Keys, Hash: s.Hash, SHA256: s.SHA256, Taken: s.Taken}
}

// Snapshot takes an etcd snapshot of the local member into DATA's backups
// directory and keeps the newest of the seed's backup.keep there. The roll
// takes one before each node's step, so a node whose new slot cannot read
// its data still has a copy made just before. Like a scheduled backup it
// leaves etcd its room on DATA (makeRoom), or is not taken: a roll stops
// there rather than fill the disk of a member it is about to reboot.
func (a *apiNode) Snapshot(ctx context.Context) (nodeapi.Snapshot, error) {
	n := a.n
	if n.supervisor() == nil {
		return nodeapi.Snapshot{}, fmt.Errorf("%w: etcd is not running", server.ErrBusy)
	}
	// One snapshot or backup at a time: each makes its own room on DATA.
	n.backupMu.Lock()
	defer n.backupMu.Unlock()
	m := n.localMember()
	c, err := m.client()
	if err != nil {
		return nodeapi.Snapshot{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	st, err := c.Status(ctx, c.Endpoints()[0])
	if err != nil {
		return nodeapi.Snapshot{}, fmt.Errorf("etcd status: %w", err)
	}
	free, err := dataFree(n.backupsDir(), n.root)
	if err != nil {
		return nodeapi.Snapshot{}, err
	}
	if err := n.makeRoom(n.backupsDir(), free, st.DbSize, m.QuotaBytes); err != nil {
		return nodeapi.Snapshot{}, err
	}
	rc, err := c.Snapshot(ctx)
	if err != nil {
		return nodeapi.Snapshot{}, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	snap, err := backup.Save(n.backupsDir(), rc, n.name, time.Now(), n.backupKeep())
	if err != nil {
		return nodeapi.Snapshot{}, err
	}
	n.log.Printf("snapshot: %s (%d bytes, revision %d, %d keys, verified)", snap.Path, snap.Size, snap.Revision, snap.Keys)
	return apiSnapshot(snap), nil
}
