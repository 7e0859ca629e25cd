package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
