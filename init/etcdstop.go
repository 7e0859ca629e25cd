package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/conncut"
)

// Stopping etcd without waiting on its peer listener.
//
// On SIGTERM etcd (embed.Etcd.Close) stops its gRPC servers, then its
// server: a leader hands its leadership over, raft stops, the WAL is
// synced and closed, and then the database (bbolt commits what is pending
// and closes). Only after that does it close its peer listener, waiting up
// to a second for the peers' streams to go idle, which they never are in a
// cluster: every stop of a member with peers spends that second, on every
// reboot and every turn of a roll (measured in session 24: 0.91 s of a
// 1.28 s stop). Once the WAL and the database are closed, nothing etcd
// does is left to lose, so etcdStorageClosed lets the supervisor end it
// with SIGKILL there (supervise.Supervisor.Finished).
//
// It reads which files etcd holds open from /proc/PID/fd. It answers only
// for an etcd that held both its WAL (the member/wal directory or a file
// in it) and its database (member/snap/db) open when it was told to stop,
// and only true once it holds neither: etcd keeps the WAL open from its
// start to raft's stop, so neither a defragmentation (which reopens the
// database) nor a snapshot from the leader (which replaces it) can look
// like the end. An etcd still starting, or one that never opened them,
// gets the plain wait. Whenever /proc cannot be read the answer is false.

// etcdStorageClosed returns the supervisor's Finished hook for an etcd
// whose data directory is dataDir, reading procDir (/proc).
func etcdStorageClosed(procDir, dataDir string) func(pid int) func() bool {
	return func(pid int) func() bool {
		dir := dataDir
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		// /proc shows the paths with every symbolic link resolved.
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		fds := filepath.Join(procDir, strconv.Itoa(pid), "fd")
		wal, db, ok := etcdStorageOpen(fds, dir)
		if !ok || !wal || !db {
			return nil
		}
		return func() bool {
			wal, db, ok := etcdStorageOpen(fds, dir)
			return ok && !wal && !db
		}
	}
}

// etcdStorageOpen reports whether the process whose fd directory is fds
// holds etcd's WAL and its database in dataDir open; ok is false when fds
// cannot be read (the process is gone, or /proc is not there).
func etcdStorageOpen(fds, dataDir string) (wal, db, ok bool) {
	entries, err := os.ReadDir(fds)
	if err != nil {
		return false, false, false
	}
	walDir := filepath.Join(dataDir, "member", "wal")
	dbFile := filepath.Join(dataDir, "member", "snap", "db")
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fds, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // closed since ReadDir
		}
		if err != nil {
			return false, false, false
		}
		switch {
		case target == walDir || strings.HasPrefix(target, walDir+"/"):
			wal = true
		case target == dbFile:
			db = true
		}
	}
	return wal, db, true
}

// Ending etcd's client connections once in-flight requests had their time.
//
// Before any of that, etcd stops its client servers: it closes its client
// listener, tells every connection to go away, and waits for each to go
// idle, up to its request timeout (5 s plus two election timeouts, 7 s
// with the defaults), and only then closes what is left itself. A
// connection that carries a watch never goes idle: kube-apiserver keeps
// hundreds of watches on every member, so every stop of a member with
// such a client, on every reboot and every turn of a roll, spent that
// whole timeout before raft began to stop (measured: plain upstream etcd
// with one `etcdctl watch` open takes 7.0 s from SIGTERM to its exit,
// against 0.1 s without). etcdCutClients ends the connections still open
// after clientDrain, from outside etcd (init/conncut), as etcd would at
// its timeout: the watches' clients see their connection close and
// resume on another member from their last revision, as they do at the
// timeout. Nothing of etcd's storage is touched: raft, the WAL and the
// database stop afterwards as always, and the peers' connections are left
// alone. A request still in flight after clientDrain ends for its client
// as it would at the timeout, with an error and an unknown outcome.

// clientDrain is how long, after its SIGTERM, etcd's clients have to
// finish their requests in flight. A put takes milliseconds on a healthy
// cluster, and a second or two at the worst the benches saw under
// emulation (p99 at 256 clients).
const clientDrain = 2 * time.Second

// etcdCutClients returns the supervisor's Stopping hook for an etcd that
// serves clients on ports: after drain, unless etcd has exited, it ends
// every client connection etcd still holds, and logs how many.
func etcdCutClients(procDir string, ports []uint16, drain time.Duration, logf func(string, ...any)) func(pid int, exited <-chan struct{}) {
	return func(pid int, exited <-chan struct{}) {
		t := time.NewTimer(drain)
		defer t.Stop()
		select {
		case <-exited:
			return
		case <-t.C:
		}
		conns, err := conncut.List(procDir, pid, ports)
		if err != nil {
			select {
			case <-exited: // gone meanwhile: nothing to say
			default:
				logf("stop etcd (pid %d): its client connections: %v", pid, err)
			}
			return
		}
		if len(conns) == 0 {
			return
		}
		n, err := conncut.Cut(pid, conns)
		logf("stop etcd (pid %d): ended %d of its %d client connections still open %s after SIGTERM (watches, or requests that outlived the drain), as etcd would at its request timeout", pid, n, len(conns), drain)
		if err != nil {
			logf("stop etcd (pid %d): %v", pid, err)
		}
	}
}
