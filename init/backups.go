package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/nodeapi"
)

// Scheduled backups (the seed's backup section): one node of the cluster
// at a time, the holder of the etcd election backupElection, takes a
// snapshot every interval, from a follower when there is one (a snapshot
// costs its member a read of the whole database, better not the
// leader's), verifies it and keeps the newest on its own DATA. After each
// it writes backupLastKey, so that a node that wins the election later
// keeps the schedule, and status can tell the last backup's age.
const (
	backupElection = "/etcdbox/backup/election"
	backupLastKey  = "/etcdbox/backup/last"
	// backupLeaseTTL bounds how long a dead holder keeps the election.
	backupLeaseTTL = 30
)

// lastBackup is the value of backupLastKey.
type lastBackup struct {
	Node     string    `json:"node"`
	Name     string    `json:"name"`
	Member   string    `json:"member"`
	Revision int64     `json:"revision"`
	Taken    time.Time `json:"taken"`
	// Due is when the next backup is due, when not Taken plus the
	// interval: a failed try sets it a tenth of the interval later.
	Due time.Time `json:"due,omitzero"`
	// The last failed try, since the backup above: where, when and why,
	// so that every node's status can tell why backups are late.
	FailedNode string    `json:"failedNode,omitempty"`
	FailedAt   time.Time `json:"failedAt,omitzero"`
	Failed     string    `json:"failed,omitempty"`
}

// failedLen bounds the error a failed try records in etcd.
const failedLen = 400

// truncate cuts s to at most n bytes, on a rune boundary, marking a cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// due is when the next backup is due: when a failed try said, else one
// interval (every) after the last backup taken.
func (b lastBackup) due(every time.Duration) time.Time {
	if !b.Due.IsZero() {
		return b.Due
	}
	return b.Taken.Add(every)
}

// scheduleBackups is a long-lived part: it runs the node's turns at the
// backups, one after another, until ctx ends.
func (n *node) scheduleBackups(ctx context.Context) {
	every := n.seed.Backup.BackupInterval()
	if every == 0 {
		n.log.Printf("backups: none scheduled (seed backup.interval 0)")
		return
	}
	for wait := time.Second; ctx.Err() == nil; wait = min(2*wait, time.Minute) {
		err := n.backupTurn(ctx, every)
		if ctx.Err() != nil {
			return
		}
		n.log.Printf("backups: %v (again in %s)", err, wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// backupTurn waits until the local member serves, campaigns for the
// backup election and, once it holds it, takes a backup each time the
// last one is every old, until it loses the election's lease or ctx ends.
func (n *node) backupTurn(ctx context.Context, every time.Duration) error {
	c, err := n.localMember().client()
	if err != nil {
		return err
	}
	defer c.Close()
	for ready(ctx, c) != nil {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	s, err := concurrency.NewSession(c, concurrency.WithTTL(backupLeaseTTL), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("backup election: %w", err)
	}
	defer resign(ctx, c, s)
	e := concurrency.NewElection(s, backupElection)
	if err := e.Campaign(ctx, n.name); err != nil {
		return fmt.Errorf("backup election: %w", err)
	}
	n.log.Printf("backups: this node takes the cluster's backups, every %s, keeping %d", every, n.backupKeep())
	for {
		last, err := readLastBackup(ctx, c)
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.Done():
			return errors.New("lost the backup election's lease")
		case <-time.After(time.Until(last.due(every))):
		}
		snap, err := n.takeBackup(ctx)
		if err != nil {
			// Not again at once: a failing backup must not hammer a
			// member; the next try is a tenth of the interval away.
			// The record keeps the last backup taken, and says why
			// this try failed.
			n.log.Printf("backups: %v", err)
			now := time.Now()
			last.Due = now.Add(every / 10)
			last.FailedNode, last.FailedAt, last.Failed = n.name, now, truncate(err.Error(), failedLen)
			if err := writeLastBackup(ctx, c, last); err != nil {
				return err
			}
			continue
		}
		if err := writeLastBackup(ctx, c, lastBackup{Node: n.name, Name: snap.Name, Member: snap.Member, Revision: snap.Revision, Taken: snap.Taken}); err != nil {
			return err
		}
	}
}

// resign gives up the backup election when the node stops (ctx ended),
// so that the next node takes the backups at once rather than after
// backupLeaseTTL: it revokes the session's lease under a short context of
// its own, since Session.Close revokes under ctx, which has ended.
func resign(ctx context.Context, c *clientv3.Client, s *concurrency.Session) {
	if ctx.Err() != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_, _ = c.Revoke(rctx, s.Lease())
	}
	_ = s.Close()
}

func readLastBackup(ctx context.Context, c *clientv3.Client) (lastBackup, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := c.Get(ctx, backupLastKey)
	if err != nil {
		return lastBackup{}, fmt.Errorf("read %s: %w", backupLastKey, err)
	}
	var last lastBackup
	if len(r.Kvs) == 1 {
		_ = json.Unmarshal(r.Kvs[0].Value, &last) // a bad record: back up now
	}
	return last, nil
}

func writeLastBackup(ctx context.Context, c *clientv3.Client, last lastBackup) error {
	b, err := json.Marshal(last)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, backupLastKey, string(b)); err != nil {
		return fmt.Errorf("write %s: %w", backupLastKey, err)
	}
	return nil
}

// takeBackup snapshots a member, a follower when one answers, into this
// node's backups directory, verified, once DATA has room for it.
func (n *node) takeBackup(ctx context.Context) (backup.Snapshot, error) {
	n.backupMu.Lock()
	defer n.backupMu.Unlock()
	m := n.localMember()
	c, err := m.client()
	if err != nil {
		return backup.Snapshot{}, err
	}
	defer c.Close()
	src, name, size, err := backupSource(ctx, c)
	if err != nil {
		return backup.Snapshot{}, err
	}
	free, err := dataFree(n.backupsDir(), n.root)
	if err != nil {
		return backup.Snapshot{}, err
	}
	if err := n.makeRoom(n.backupsDir(), free, size, m.QuotaBytes); err != nil {
		return backup.Snapshot{}, err
	}
	tc, err := m.tlsConfig()
	if err != nil {
		return backup.Snapshot{}, err
	}
	sc, err := clientv3.New(clientv3.Config{Endpoints: []string{src}, TLS: tc, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return backup.Snapshot{}, err
	}
	defer sc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	start := time.Now()
	rc, err := sc.Snapshot(ctx)
	if err != nil {
		return backup.Snapshot{}, fmt.Errorf("snapshot of %s: %w", name, err)
	}
	defer rc.Close()
	snap, err := backup.Save(n.backupsDir(), rc, name, time.Now(), n.backupKeep())
	if err != nil {
		return backup.Snapshot{}, err
	}
	n.log.Printf("backups: %s of member %s in %s: %d bytes, revision %d, %d keys, verified", snap.Name, name,
		time.Since(start).Round(time.Millisecond), snap.Size, snap.Revision, snap.Keys)
	snap.Pushed = n.pushBackup(ctx, snap)
	return snap, nil
}

// pushBackup pushes a kept backup to the seed's registry, if it names one,
// and returns its reference by digest. A failed push is logged and the
// backup stays kept: DATA holds it either way.
func (n *node) pushBackup(ctx context.Context, snap backup.Snapshot) string {
	p := n.seed.Backup.Push
	if p == nil {
		return ""
	}
	reg := backup.Registry{Repository: p.Repository, Insecure: p.Insecure, Username: p.Username, Password: p.Password}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	start := time.Now()
	ref, err := backup.Push(ctx, reg, snap, n.seed.Cluster)
	if err != nil {
		n.log.Printf("backups: push %s: %v (kept on DATA)", snap.Name, err)
		return ""
	}
	n.log.Printf("backups: pushed %s as %s in %s", snap.Name, ref, time.Since(start).Round(time.Millisecond))
	return ref
}

// backupSource picks the member to snapshot: a started follower that
// answers, else the leader; it returns its client URL, name and database
// size.
func backupSource(ctx context.Context, c *clientv3.Client) (string, string, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ml, err := c.MemberList(ctx)
	if err != nil {
		return "", "", 0, fmt.Errorf("member list: %w", err)
	}
	var leaderURL, leaderName string
	var leaderSize int64
	for _, m := range ml.Members {
		if m.IsLearner || len(m.ClientURLs) == 0 {
			continue
		}
		st, err := c.Status(ctx, m.ClientURLs[0])
		if err != nil || len(st.Errors) > 0 && !onlyNOSPACE(st.Errors) {
			continue
		}
		if st.Leader != st.Header.MemberId {
			return m.ClientURLs[0], m.Name, st.DbSize, nil
		}
		leaderURL, leaderName, leaderSize = m.ClientURLs[0], m.Name, st.DbSize
	}
	if leaderURL == "" {
		return "", "", 0, errors.New("no member answers for a snapshot")
	}
	return leaderURL, leaderName, leaderSize, nil
}

// onlyNOSPACE says whether a status's errors are NOSPACE alarms only: a
// full database is still worth a backup.
func onlyNOSPACE(errs []string) bool {
	for _, e := range errs {
		if !strings.Contains(e, "NOSPACE") {
			return false
		}
	}
	return true
}

// etcdDefaultQuota is etcd's database quota when none is given.
const etcdDefaultQuota = 2 << 30

// walReserve is the room kept for etcd's WAL beside its database: two of
// its 64 MiB segments (it preallocates the next one).
const walReserve = nodeapi.WALRoom

// dataFree is what the filesystem of dir (or of root, when dir does not
// exist yet) has free for an unprivileged writer.
func dataFree(dir, root string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		if err := unix.Statfs(root, &st); err != nil {
			return 0, fmt.Errorf("statfs %s: %w", root, err)
		}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// backupReserve is the room on DATA that backups leave to etcd, whose
// database quota is quota (0: etcd's default): the quota itself and
// walReserve. With that much free after every backup, a database below
// its quota can still grow to it, and one at its quota can still be
// defragmented (a copy of it). The quota's share of DATA (quota.go) is
// sized so that etcd raises NOSPACE, which keeps the cluster readable and
// can be cleared, before the disk fills and etcd stops on a failed write;
// backups that took that room would undo it. A fixed margin (256 MiB
// until session 28) did: six kept backups of a 2 GiB database on a 20 GiB
// DATA left 5.6 GiB free to a member whose quota let it grow by 6.
func backupReserve(quota int64) int64 {
	if quota <= 0 {
		quota = etcdDefaultQuota
	}
	return quota + walReserve
}

// makeRoom checks that DATA has room for a snapshot of a dbSize database and
// still keeps backupReserve(quota) free after it. When the kept backups
// are in the way it drops the oldest first, as few as make the room, but
// never the newest (backup.Room). It drops nothing and fails when even
// that is not enough: the backup is not taken, the log says why, and the
// status shows the last backup's age.
// free is what DATA has free now (dataFree).
func (n *node) makeRoom(dir string, free, dbSize, quota int64) error {
	kept, err := backup.List(dir)
	if err != nil {
		return fmt.Errorf("list backups: %w", err)
	}
	// A quarter more than the member's database: it may grow meanwhile.
	reserve := backupReserve(quota)
	drop, err := backup.Room(kept, free, dbSize+dbSize/4, reserve)
	if err != nil {
		return fmt.Errorf("no room on DATA (%v; the reserve is etcd's database quota, %s, and %s for its WAL, so that the database can reach its quota and still be defragmented): not taken; grow the disk (the node grows DATA with it) or lower the seed's etcd.quotaBackendBytes",
			err, size(reserve-walReserve), size(walReserve))
	}
	for _, s := range drop {
		if err := backup.Remove(s); err != nil {
			return err
		}
		n.log.Printf("backups: dropped %s (%s, the oldest kept) to make room on DATA for the next one", s.Name, size(s.Size))
	}
	return nil
}

// Backup takes a backup now (POST /v1/backups), as the schedule would.
func (a *apiNode) Backup(ctx context.Context) (nodeapi.Snapshot, error) {
	if a.n.supervisor() == nil {
		return nodeapi.Snapshot{}, errors.New("etcd is not running")
	}
	snap, err := a.n.takeBackup(ctx)
	if err != nil {
		return nodeapi.Snapshot{}, err
	}
	return apiSnapshot(snap), nil
}

// Backups lists the snapshots this node keeps (GET /v1/backups).
func (a *apiNode) Backups() ([]nodeapi.Snapshot, error) {
	snaps, err := backup.List(a.n.backupsDir())
	if err != nil {
		return nil, err
	}
	out := []nodeapi.Snapshot{}
	for _, s := range snaps {
		out = append(out, apiSnapshot(s))
	}
	return out, nil
}

// OpenBackup opens the kept snapshot called name (GET /v1/backups?name=).
func (a *apiNode) OpenBackup(name string) (io.ReadCloser, nodeapi.Snapshot, error) {
	f, s, err := backup.Open(a.n.backupsDir(), name)
	if err != nil {
		return nil, nodeapi.Snapshot{}, err
	}
	return f, apiSnapshot(s), nil
}
