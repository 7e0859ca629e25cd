package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/discovery"
	"github.com/etcdbox/etcdbox/init/api"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/upgrade"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"golang.org/x/sys/unix"
)

// serveAPI starts the node API on the seed's api.port (DESIGN §8).
func (n *node) serveAPI(context.Context) error {
	srv, err := api.New(api.Config{PKIDir: n.pkiDir(), Node: &apiNode{n: n}, Log: n.log.Printf})
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
		if err := srv.Serve(l); err != nil && !strings.Contains(err.Error(), "closed") {
			n.log.Printf("node API: %v", err)
		}
	}()
	n.log.Printf("node API on https://%s", addr)
	return nil
}

// apiNode answers the node API for the init.
type apiNode struct {
	n *node

	mu       sync.Mutex
	progress nodeapi.UpgradeProgress

	snapMu sync.Mutex // one snapshot at a time
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
	if n.seed != nil {
		st.Cluster = n.seed.Cluster
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
				if s.Entry != nil {
					out.Generation = s.Entry.Generation
					out.TriesLeft = s.Entry.Name.Left
				}
				st.Slots = append(st.Slots, out)
				if name == st.Slot {
					st.Blessed = s.Status() == slot.Blessed
				}
			}
			st.LastRollback = lastRollback(n.esp, ss, st.Slot)
		}
	}
	if b, err := os.ReadFile(filepath.Join(n.pkiDir(), "server.crt")); err == nil {
		st.CertExpiry, _ = pki.Expiry(b)
	}
	st.Member.Role = nodeapi.RoleNone
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
				st.Member.Healthy = ready(sctx, c) == nil
			}
		}
	}
	return st, nil
}

// lastRollback reads why the slot that is not booted was given up, when
// it is bad (Status.LastRollback).
func lastRollback(esp slot.FS, ss slot.State, booted string) string {
	other := slot.Other(booted)
	if other == "" || ss.Slots[other].Status() != slot.Bad {
		return ""
	}
	b, err := esp.ReadFile(failedRecord(other))
	if why := strings.TrimSpace(string(b)); err == nil && why != "" {
		return "slot " + other + ": " + why
	}
	const none = ": bad, no reason recorded (kernel panic, hang or crash loop)"
	b, err = esp.ReadFile(reachedRecord(other))
	if step := strings.TrimSpace(string(b)); err == nil && step != "" {
		return "slot " + other + none + "; its last boot reached " + strconv.Quote(step)
	}
	return "slot " + other + none + "; its last boot never mounted the ESP (the kernel, a missing disk driver, or the init before that step)"
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
	return nodeapi.SlotEmpty
}

func (a *apiNode) Logs(lines int) []string {
	all := a.n.ring.Lines()
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return all
}

func (a *apiNode) Reboot() error {
	a.n.requestShutdown("reboot requested through the node API", true)
	return nil
}

func (a *apiNode) Upgrade() nodeapi.UpgradeProgress {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.progress
	if p.Phase == "" {
		p.Phase = nodeapi.PhaseIdle
	}
	return p
}

func (a *apiNode) setPhase(target, phase, errText string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.progress = nodeapi.UpgradeProgress{Target: target, Phase: phase, Error: errText, Updated: time.Now()}
	if errText != "" {
		a.n.log.Printf("upgrade %s: %s: %s", target, phase, errText)
	} else {
		a.n.log.Printf("upgrade %s: %s", target, phase)
	}
}

// StageUpgrade pulls ref and writes it into the inactive slot in the
// background. The same ref staging or staged is accepted again. A ref
// that is not pinned by digest, or names a registry the seed's
// upgrade.registries does not list, is refused at once.
func (a *apiNode) StageUpgrade(_ context.Context, ref string) error {
	n := a.n
	if n.esp == "" {
		return fmt.Errorf("%w: no ESP mounted (container mode has no slots)", api.ErrBusy)
	}
	// The allowlist is checked here, before any network traffic, and
	// its refusal goes back to the caller, not to a background phase.
	d, err := upgrade.ParseRef(ref, false)
	if err != nil {
		return fmt.Errorf("%w: %w", api.ErrBadRequest, err)
	}
	if err := upgrade.CheckRegistry(d, n.seed.Upgrade.Registries); err != nil {
		n.log.Printf("upgrade: refused: %v", err)
		return fmt.Errorf("%w: %w", api.ErrRefused, err)
	}
	a.mu.Lock()
	p := a.progress
	busy := p.Phase == nodeapi.PhasePulling || p.Phase == nodeapi.PhaseWriting
	if busy && p.Target == ref {
		a.mu.Unlock()
		return nil
	}
	if busy {
		a.mu.Unlock()
		return fmt.Errorf("%w: staging %s", api.ErrBusy, p.Target)
	}
	a.mu.Unlock()
	a.setPhase(ref, nodeapi.PhasePulling, "")
	go func() {
		if err := a.stage(ref); err != nil {
			a.setPhase(ref, nodeapi.PhaseFailed, err.Error())
			return
		}
		a.setPhase(ref, nodeapi.PhaseStaged, "")
	}()
	return nil
}

// stage pulls ref and writes it into the slot that is not booted.
func (a *apiNode) stage(ref string) error {
	n := a.n
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := upgrade.ParseRef(ref, false)
	if err != nil {
		return err
	}
	insecure := false
	for _, r := range n.seed.Upgrade.InsecureRegistries {
		insecure = insecure || r == d.RegistryStr()
	}
	boot, err := upgrade.Fetch(ctx, ref, upgrade.Options{Insecure: insecure})
	if err != nil {
		return err
	}
	a.setPhase(ref, nodeapi.PhaseWriting, "")
	st, err := slot.Read(n.esp)
	if err != nil {
		return err
	}
	booted := n.bootedSlot()
	cur := st.Slots[booted]
	if cur.Entry == nil {
		return fmt.Errorf("the booted slot %q has no entry to take the kernel command line from", booted)
	}
	target := slot.Other(booted)
	// A new try of the slot starts without the old reason it failed, or
	// the step its last boot reached.
	for _, rec := range []string{failedRecord(target), reachedRecord(target)} {
		if err := n.esp.Remove(rec); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", rec, err)
		}
	}
	// The new slot boots with the booted slot's command line (Stage sets
	// its etcdbox.slot) less the extras the booted slot's image brought,
	// plus the new image's extras; those are recorded next to the slot
	// for the upgrade after this one.
	prev, err := n.esp.ReadFile(cmdlineRecord(booted))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", cmdlineRecord(booted), err)
	}
	options := slotOptions(cur.Entry.Options, string(prev), boot.Cmdline)
	if err := n.esp.WriteFile(cmdlineRecord(target), strings.NewReader(boot.Cmdline+"\n")); err != nil {
		return fmt.Errorf("write %s: %w", cmdlineRecord(target), err)
	}
	e, err := slot.Stage(n.esp, target, slot.Update{
		Kernel:  bytes.NewReader(boot.Kernel),
		Initrd:  bytes.NewReader(boot.Initrd),
		Options: options,
		Tries:   n.seed.Upgrade.Tries,
	})
	if err != nil {
		return err
	}
	n.log.Printf("upgrade: %s staged in slot %s as %s (generation %d, options %q)", boot.Digest, target, e.File, e.Generation, e.Options)
	return nil
}

// cmdlineRecord is the ESP file where stage keeps the kernel command-line
// extras the image staged in slot brought (upgrade.Boot.Cmdline), so that
// the next upgrade, booted from that slot, can leave them out.
func cmdlineRecord(slot string) string { return "etcdbox/" + slot + ".cmdline" }

// slotOptions is the kernel command line of a slot being staged: the
// booted entry's options without the extras the booted slot's own image
// added (prev, from its cmdlineRecord; each argument removed once, the
// last occurrence), then the new image's extras. Slot images built
// before images carried extras, and the raw image's first slot, have no
// record: their options are kept whole. The staged slot's etcdbox.slot is
// set by slot.Stage, which also insists on a non-zero panic=. A seed on
// the booted command line is left out (it can carry the CA key, and the
// entry's options are logged): the new slot reads the cached seed.
func slotOptions(booted, prev, extras string) string {
	fields := strings.Fields(discovery.WithoutSeed(booted))
	for _, p := range strings.Fields(prev) {
		for i := len(fields) - 1; i >= 0; i-- {
			if fields[i] == p {
				fields = append(fields[:i], fields[i+1:]...)
				break
			}
		}
	}
	return strings.Join(append(fields, strings.Fields(extras)...), " ")
}

// backupsDir is where snapshots are kept, on DATA next to etcd's data.
func (n *node) backupsDir() string { return filepath.Join(n.root, "backups") }

// Snapshot takes an etcd snapshot of the local member into DATA's backups
// directory and keeps the newest nodeapi.SnapshotsKept there. The roll
// takes one before each node's step, so a node whose new slot cannot read
// its data still has a copy made just before.
func (a *apiNode) Snapshot(ctx context.Context) (nodeapi.Snapshot, error) {
	n := a.n
	if n.supervisor() == nil {
		return nodeapi.Snapshot{}, fmt.Errorf("%w: etcd is not running", api.ErrBusy)
	}
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	c, err := n.localMember().client()
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
	rc, err := c.Snapshot(ctx)
	if err != nil {
		return nodeapi.Snapshot{}, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer rc.Close()
	snap, err := saveSnapshot(n.backupsDir(), rc, st.Header.Revision, time.Now())
	if err != nil {
		return nodeapi.Snapshot{}, err
	}
	n.log.Printf("snapshot: %s (%d bytes, revision %d)", snap.Path, snap.Size, snap.Revision)
	return snap, nil
}

// snapshotPrefix and snapshotSuffix frame a snapshot's file name; the time
// stamp between them sorts in time order.
const (
	snapshotPrefix = "etcd-"
	snapshotSuffix = ".db"
)

// saveSnapshot writes r to dir under a time-stamped name (temporary name,
// fsync, rename, fsync of dir), then removes all but the newest
// nodeapi.SnapshotsKept snapshots.
func saveSnapshot(dir string, r io.Reader, rev int64, now time.Time) (nodeapi.Snapshot, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nodeapi.Snapshot{}, err
	}
	name := snapshotPrefix + now.UTC().Format("20060102T150405.000000000Z") + snapshotSuffix
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nodeapi.Snapshot{}, err
	}
	size, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return nodeapi.Snapshot{}, fmt.Errorf("write snapshot %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	if err := pruneSnapshots(dir, nodeapi.SnapshotsKept); err != nil {
		return nodeapi.Snapshot{}, err
	}
	return nodeapi.Snapshot{Path: path, Size: size, Revision: rev, Taken: now}, nil
}

// pruneSnapshots removes all but the newest keep snapshots in dir, and
// temporary files a crash left behind.
func pruneSnapshots(dir string, keep int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var snaps []string
	for _, e := range ents {
		switch name := e.Name(); {
		case strings.HasPrefix(name, snapshotPrefix) && strings.HasSuffix(name, snapshotSuffix+".tmp"):
			os.Remove(filepath.Join(dir, name))
		case strings.HasPrefix(name, snapshotPrefix) && strings.HasSuffix(name, snapshotSuffix):
			snaps = append(snaps, name)
		}
	}
	slices.Sort(snaps)
	for len(snaps) > keep {
		if err := os.Remove(filepath.Join(dir, snaps[0])); err != nil {
			return fmt.Errorf("remove old snapshot: %w", err)
		}
		snaps = snaps[1:]
	}
	return nil
}
