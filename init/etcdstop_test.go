package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/internal/etcdtest"
	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/internal/testenv"
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

// TestEtcdCutClientsRealEtcd stops a member of a 3-member bin/etcd
// cluster that a client watches through, as the supervisor does: SIGTERM,
// with the Stopping hook. Its request timeout is 9 s here (5 s and two
// election timeouts of 2 s), and etcd waits that long for the watch's
// connection to go idle; the hook ends the connection after its drain,
// so etcd exits well before. A writer runs through the stop, on every
// member, and its history must be linearizable.
func TestEtcdCutClientsRealEtcd(t *testing.T) {
	t.Parallel()
	pkiDir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, pki.Init(pkiDir, false))
	c := etcdtest.StartArgs(t, pkiDir, []string{"--heartbeat-interval=100", "--election-timeout=2000"}, "n1", "n2", "n3")
	n1 := c.Member(t, "n1")
	u, err := url.Parse(n1.ClientURL)
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)

	watcher := c.Client(t, n1.ClientURL)
	wch := watcher.Watch(t.Context(), "watched/", clientv3.WithPrefix())
	_, err = c.Client(t).Put(t.Context(), "watched/0", "v")
	require.NoError(t, err)
	select {
	case resp := <-wch:
		require.NoError(t, resp.Err())
		require.Len(t, resp.Events, 1, "the watch on n1 is established")
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event from n1 in 30s")
	}
	w, err := kvwriter.Start(c.Endpoints(), c.TLS())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return w.LastAck().After(time.Now().Add(-time.Second)) }, 30*time.Second, 10*time.Millisecond, "the writer writes")

	var logs testenv.Buffer
	logf := func(format string, args ...any) { fmt.Fprintf(&logs, format+"\n", args...) }
	hook := etcdCutClients("/proc", []uint16{uint16(port)}, 300*time.Millisecond, logf)
	require.NoError(t, syscall.Kill(n1.Pid(), syscall.SIGTERM))
	hooked := make(chan struct{})
	go func() { defer close(hooked); hook(n1.Pid(), n1.Done()) }()
	select {
	case <-n1.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("etcd still running 5s after SIGTERM: its watch's connection was not ended (hook: %q)", logs.String())
	}
	<-hooked
	assert.Regexp(t, fmt.Sprintf(`stop etcd \(pid %d\): ended ([1-9]\d*) of its ([1-9]\d*) client connections still open 300ms after SIGTERM`, n1.Pid()), logs.String())
	assert.NotContains(t, logs.String(), "pidfd")

	res, err := w.Stop(30 * time.Second)
	require.NoError(t, err)
	t.Logf("writer: %d acknowledged puts, %d failed requests, longest gap %s", res.Acked, res.Failed, res.Gap.Round(time.Millisecond))
	assert.Positive(t, res.Acked)
	assert.Equal(t, porcupine.Ok, res.Check(time.Minute), "the writer's history is linearizable")
}
