package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/backup"
	"github.com/etcdbox/etcdbox/init/console"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/seed"
)

// TestScheduledBackups runs three container-mode nodes whose seed asks for
// a backup every 10 s, two kept: one node holds the backup election and
// takes them, verified, of a member its log names; it keeps two; the node
// API lists them and serves one whole, which verifies; when the holder
// stops, it resigns, and another node takes over the schedule at once.
func TestScheduledBackups(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1", "n2", "n3")
	c.backup = seed.Backup{Interval: "10s", Keep: 2}
	var nodes []*cnode
	for _, name := range []string{"n1", "n2", "n3"} {
		n := c.nodes[name]
		c.writeSeed(n, "backups", 3, "n1", "n2", "n3")
		n.start()
		nodes = append(nodes, n)
	}
	holder := waitAnyLog(t, nodes, "backups: this node takes the cluster's backups, every 10s, keeping 2", 90*time.Second)
	for _, n := range nodes {
		if n != holder {
			assert.NotContains(t, n.log(), "backups: etcd-", "%s took a backup without the election", n.name)
		}
	}
	// Three backups: two kept.
	taken := regexp.MustCompile(`backups: (etcd-\S+\.db) of member (n\d) in \S+: \d+ bytes, revision (\d+), \d+ keys, verified`)
	deadline := time.Now().Add(90 * time.Second)
	for len(taken.FindAllString(holder.log(), -1)) < 3 {
		require.True(t, time.Now().Before(deadline), "%s took fewer than three backups in 90s:\n%s", holder.name, tail(holder.log(), 20))
		time.Sleep(200 * time.Millisecond) // polling interval, bounded by the deadline
	}
	got := taken.FindAllStringSubmatch(holder.log(), -1)
	t.Logf("backups: %v", got)
	dir := backup.Dir(filepath.Join(holder.dir, "data"))
	kept, err := backup.List(dir)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(kept), 2)
	assert.LessOrEqual(t, len(kept), 2, "keep 2")

	api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(holder.apiPort), c.pkiDir)
	require.NoError(t, err)
	defer api.Close()
	listed, err := api.Backups(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, listed)
	last := listed[len(listed)-1]
	assert.Positive(t, last.Revision)
	assert.Contains(t, []string{"n1", "n2", "n3"}, last.Member)
	f, err := os.CreateTemp(t.TempDir(), "got-*.db")
	require.NoError(t, err)
	sum, err := api.GetBackup(t.Context(), last.Name, f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	st, err := backup.Verify(f.Name())
	require.NoError(t, err, "the snapshot the node served")
	assert.Equal(t, backup.Stats{Revision: last.Revision, Keys: last.Keys, Hash: last.Hash, SHA256: last.SHA256}, st)
	assert.Equal(t, last.SHA256, sum)

	// Another node keeps the schedule when the holder stops, at once:
	// the holder resigns as it shuts down, before it stops etcd. Had it
	// only gone away, its lease (backupLeaseTTL, 30 s, kept alive every
	// 10 s) would hold the election for 20 s or more.
	stopped := time.Now()
	holder.stop()
	var rest []*cnode
	for _, n := range nodes {
		if n != holder {
			rest = append(rest, n)
		}
	}
	assert.Regexp(t, `etcd stopped in \S+ \(the node's own parts in \S+ before it\)`, holder.log(), "%s stopped its parts, then etcd", holder.name)
	assert.NotContains(t, holder.log(), "still running after", "a part of %s outlived the shutdown's wait", holder.name)
	next := waitAnyLog(t, rest, "backups: this node takes the cluster's backups", 15*time.Second)
	t.Logf("%s stopped, %s took over %s after the stop began", holder.name, next.name, time.Since(stopped).Round(time.Millisecond))
}

// waitAnyLog waits until one of nodes logs want, and returns it.
func waitAnyLog(t *testing.T, nodes []*cnode, want string, within time.Duration) *cnode {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			if strings.Contains(n.log(), want) {
				return n
			}
		}
		time.Sleep(100 * time.Millisecond) // polling interval, bounded by the deadline
	}
	require.FailNow(t, "no node logged "+want)
	return nil
}

// A backup leaves etcd its quota and two WAL segments free: it drops the
// oldest kept backups (never the newest) when they are in the way, and
// is not taken when even that is not enough.
func TestBackupRoom(t *testing.T) {
	const M = 1 << 20
	assert.Equal(t, int64(2<<30+128*M), backupReserve(0), "etcd's default quota")
	assert.Equal(t, int64(187*M+128*M), backupReserve(187*M))

	dir := t.TempDir()
	var names []string
	for i, at := range []string{"20261206T010000.000000000Z", "20261206T020000.000000000Z", "20261206T030000.000000000Z"} {
		name := "etcd-" + at + ".db"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), make([]byte, (i+1)*M), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), []byte("{}"), 0o600))
		names = append(names, name)
	}
	var out strings.Builder
	n := &node{log: console.New(&out)}
	quota := int64(64 * M)
	reserve := backupReserve(quota) // 192 MiB

	// Room enough: nothing dropped.
	require.NoError(t, n.makeRoom(dir, reserve+5*M, 4*M, quota))
	kept, err := backup.List(dir)
	require.NoError(t, err)
	assert.Len(t, kept, 3)

	// A 4 MiB database (5 MiB with its growth) with 4 MiB free beyond the
	// reserve: the oldest (1 MiB) makes the room.
	require.NoError(t, n.makeRoom(dir, reserve+4*M, 4*M, quota))
	kept, err = backup.List(dir)
	require.NoError(t, err)
	require.Len(t, kept, 2)
	assert.Equal(t, names[1], kept[0].Name)
	assert.NoFileExists(t, filepath.Join(dir, names[0]+".json"))
	assert.Contains(t, out.String(), "backups: dropped "+names[0]+" (1 MiB, the oldest kept) to make room on DATA for the next one")

	// Short by more than all but the newest: nothing dropped, not taken.
	err = n.makeRoom(dir, reserve, 4*M, quota)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no room on DATA")
	assert.Contains(t, err.Error(), "the reserve is etcd's database quota, 64 MiB, and 128 MiB for its WAL")
	assert.Contains(t, err.Error(), "not taken")
	kept, err = backup.List(dir)
	require.NoError(t, err)
	assert.Len(t, kept, 2)
}

// TestBackupFailureReported: a backup that fails is recorded in etcd
// beside the last one taken, whose time it leaves alone, so every node's
// status says why backups are late; the next success clears it.
func TestBackupFailureReported(t *testing.T) {
	t.Parallel()
	c := newCluster(t, "n1")
	c.backup = seed.Backup{Interval: "10s", Keep: 2}
	n := c.nodes["n1"]
	c.writeSeed(n, "backupfail", 1, "n1")
	// A file where the backups directory goes: every try fails.
	data := filepath.Join(n.dir, "data")
	require.NoError(t, os.MkdirAll(data, 0o700))
	dir := backup.Dir(data)
	require.NoError(t, os.WriteFile(dir, []byte("in the way"), 0o600))
	n.start()
	at := n.waitLog(0, "backups: this node takes the cluster's backups", 90*time.Second)
	n.waitLog(at, "backups: list backups:", 30*time.Second)

	api, err := nodeapi.NewClient("https://127.0.0.1:"+strconv.Itoa(n.apiPort), c.pkiDir)
	require.NoError(t, err)
	defer api.Close()
	var st nodeapi.Status
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err = api.Status(t.Context())
		if err == nil && st.Backups.Failed != "" {
			break
		}
		require.True(t, time.Now().Before(deadline), "no failed backup in the status: %+v, %v", st.Backups, err)
		time.Sleep(200 * time.Millisecond) // polling interval, bounded by the deadline
	}
	assert.Equal(t, "n1", st.Backups.FailedNode)
	assert.Contains(t, st.Backups.Failed, "not a directory")
	assert.True(t, st.Backups.LastTaken.IsZero(), "no backup taken: %+v", st.Backups)

	// Out of the way: the next try, a tenth of the interval later, is
	// taken, and the status forgets the failure.
	require.NoError(t, os.Remove(dir))
	n.waitLog(at, "verified", 30*time.Second)
	deadline = time.Now().Add(30 * time.Second)
	for {
		st, err = api.Status(t.Context())
		if err == nil && !st.Backups.LastTaken.IsZero() {
			break
		}
		require.True(t, time.Now().Before(deadline), "no backup in the status: %+v, %v", st.Backups, err)
		time.Sleep(200 * time.Millisecond) // polling interval, bounded by the deadline
	}
	assert.Empty(t, st.Backups.Failed)
	assert.Equal(t, "n1", st.Backups.LastNode)

	// The storage as the node reports it: DATA's filesystem, the backups
	// it keeps, etcd's database against the quota etcd runs with.
	s := st.Storage
	assert.Positive(t, s.DataFree)
	assert.LessOrEqual(t, s.DataFree, s.DataBytes)
	assert.Positive(t, s.Backups, "the backup just taken")
	assert.Positive(t, s.DBInUse)
	assert.LessOrEqual(t, s.DBInUse, s.DBSize)
	assert.Greater(t, s.Quota, s.DBSize)
	n.waitLog(0, "etcd: database quota "+size(s.Quota)+" ", time.Second)
}

func TestLastBackupDue(t *testing.T) {
	taken := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	assert.Equal(t, taken.Add(time.Hour), lastBackup{Taken: taken}.due(time.Hour))
	assert.Equal(t, taken.Add(6*time.Minute), lastBackup{Taken: taken, Due: taken.Add(6 * time.Minute)}.due(time.Hour))
	assert.Equal(t, "abc", truncate("abc", 10))
	assert.Equal(t, "abcdefg...", truncate("abcdefghijklm", 10))
	assert.Equal(t, "ab...", truncate("ab€€€", 7), "cut on a rune boundary")
}
