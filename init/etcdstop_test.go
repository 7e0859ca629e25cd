package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/pki"
)

// fakeFds makes procDir/pid/fd with one link per target, as /proc shows
// a process's open files.
func fakeFds(t *testing.T, procDir string, pid int, targets ...string) string {
	t.Helper()
	fds := filepath.Join(procDir, strconv.Itoa(pid), "fd")
	require.NoError(t, os.RemoveAll(fds))
	require.NoError(t, os.MkdirAll(fds, 0o755))
	for i, target := range targets {
		require.NoError(t, os.Symlink(target, filepath.Join(fds, strconv.Itoa(i))))
	}
	return fds
}

// TestEtcdStorageOpenPaths: what counts as etcd's WAL and database among
// a process's open files.
func TestEtcdStorageOpenPaths(t *testing.T) {
	proc, data := t.TempDir(), "/var/lib/etcdbox/etcd"
	for _, c := range []struct {
		name    string
		targets []string
		wal, db bool
	}{
		{"running", []string{"/dev/null", data + "/member/wal", data + "/member/wal/0000000000000001-0000000000000abc.wal", data + "/member/wal/1.tmp", data + "/member/snap/db", "socket:[123]"}, true, true},
		{"the WAL's directory alone", []string{data + "/member/wal"}, true, false},
		{"the database alone", []string{data + "/member/snap/db"}, false, true},
		{"a replaced database", []string{data + "/member/snap/db (deleted)"}, false, false},
		{"a snapshot being received", []string{data + "/member/snap/0000000000000003.snap.db"}, false, false},
		{"another data dir", []string{data + "2/member/wal", data + "2/member/snap/db"}, false, false},
		{"nothing", nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			fds := fakeFds(t, proc, 42, c.targets...)
			wal, db, ok := etcdStorageOpen(fds, data)
			assert.True(t, ok)
			assert.Equal(t, c.wal, wal, "WAL")
			assert.Equal(t, c.db, db, "database")
		})
	}
	_, _, ok := etcdStorageOpen(filepath.Join(proc, "43", "fd"), data)
	assert.False(t, ok, "a process that is gone")
}

// TestEtcdStorageClosedHook: a check only for an etcd that holds both
// open when told to stop, true only once it holds neither.
func TestEtcdStorageClosedHook(t *testing.T) {
	proc, data := t.TempDir(), "/var/lib/etcdbox/etcd"
	hook := etcdStorageClosed(proc, data)
	wal, db := data+"/member/wal/0000000000000000-0000000000000000.wal", data+"/member/snap/db"

	fakeFds(t, proc, 7, wal)
	assert.Nil(t, hook(7), "an etcd still starting (no database yet) gets the plain wait")
	assert.Nil(t, hook(8), "no such process: the plain wait")

	fakeFds(t, proc, 7, wal, db)
	check := hook(7)
	require.NotNil(t, check)
	assert.False(t, check(), "both still open")
	fakeFds(t, proc, 7, db)
	assert.False(t, check(), "the WAL is closed, the database not yet")
	fakeFds(t, proc, 7, wal)
	assert.False(t, check(), "a database reopened by a defragmentation, the WAL open")
	fakeFds(t, proc, 7, "/dev/null", "socket:[9]")
	assert.True(t, check(), "both closed: only its listeners are left")
	require.NoError(t, os.RemoveAll(filepath.Join(proc, "7")))
	assert.False(t, check(), "the process is gone: unsure, so false (its exit ends the wait anyway)")
}

// TestEtcdStorageClosedRealEtcd stops one member of a 3-member bin/etcd
// cluster the way the supervisor does: SIGTERM, then SIGKILL as soon as
// the check sees its WAL and database closed, unless etcd exits first
// (when its peers' streams end at once, it leaves no time between the
// two; the fake /proc above tests the check's answer). Its database must
// then hold every write the cluster acknowledged before the SIGTERM: the
// clean close committed them, and nothing of etcd's storage was cut off.
func TestEtcdStorageClosedRealEtcd(t *testing.T) {
	t.Parallel()
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.Start(t, pkiDir, "n1", "n2", "n3")
	cli := c.Client(t)
	var rev int64
	const keys = 50
	for i := range keys {
		resp, err := cli.Put(t.Context(), fmt.Sprintf("k%02d", i), "v")
		require.NoError(t, err)
		rev = resp.Header.Revision
	}
	m := c.Member(t, "n1")
	assert.Nil(t, etcdStorageClosed("/proc", m.DataDir())(os.Getpid()), "a process without etcd's storage open")
	check := etcdStorageClosed("/proc", m.DataDir())(m.Pid())
	require.NotNil(t, check, "a running member holds its WAL and database open")
	require.False(t, check())

	require.NoError(t, syscall.Kill(m.Pid(), syscall.SIGTERM))
	closed := false
	require.Eventually(t, func() bool {
		closed = check()
		return closed || m.Exited()
	}, 30*time.Second, 10*time.Millisecond, "etcd closes its WAL and database, or exits, after SIGTERM")
	c.Kill("n1")
	t.Logf("the check saw the storage closed before etcd exited: %v", closed)

	st, err := backup.DatabaseStats(filepath.Join(m.DataDir(), "member", "snap", "db"))
	require.NoError(t, err)
	assert.Equal(t, rev, st.Revision, "the database holds the last acknowledged write")
	assert.Equal(t, keys, st.Keys)
}
