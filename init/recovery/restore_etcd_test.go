package recovery

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// etcdProc is one real etcd member on loopback.
type etcdProc struct {
	cmd    *exec.Cmd
	client string
}

func startEtcd(t *testing.T, name, dataDir, token string, peer, client int) *etcdProc {
	t.Helper()
	peerURL, clientURL := "http://127.0.0.1:"+strconv.Itoa(peer), "http://127.0.0.1:"+strconv.Itoa(client)
	cmd := exec.Command(testenv.Bin(t, "etcd"),
		"--name="+name, "--data-dir="+dataDir,
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster="+name+"="+peerURL, "--initial-cluster-state=new",
		"--initial-cluster-token="+token, "--logger=zap", "--log-outputs=stderr", "--log-level=error")
	cmd.SysProcAttr = testenv.DieWithTest()
	require.NoError(t, cmd.Start())
	p := &etcdProc{cmd: cmd, client: clientURL}
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop stops etcd cleanly (SIGTERM), as the init does before it copies
// the database.
func (p *etcdProc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		t.Errorf("etcd did not stop within 30s of SIGTERM")
	}
}

func (p *etcdProc) dial(t *testing.T) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{p.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		if _, err := c.Get(ctx, "health"); err == nil {
			return c
		}
		require.NoError(t, ctx.Err(), "etcd at %s serves no linearizable read", p.client)
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by ctx
	}
}

// TestSaveAndRestore takes a stopped member's database as the survivor's
// snapshot and restores it as the one member of a new cluster: every key
// reads back, the cluster and member IDs are new, the revision starts
// DefaultBump above the old one, a watch from the old revision ends with
// a compaction error, and the restored member takes writes. A restore
// interrupted in its work directory is redone; one into a data dir that
// is not empty is refused.
func TestSaveAndRestore(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "etcd")
	peer, client := testenv.FreePort(t), testenv.FreePort(t)
	old := startEtcd(t, "n1", data, "c1", peer, client)
	c := old.dial(t)
	ctx := t.Context()
	want := map[string]string{}
	for i := range 50 {
		k, v := fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i)
		_, err := c.Put(ctx, k, v)
		require.NoError(t, err)
		want[k] = v
	}
	st, err := c.Status(ctx, old.client)
	require.NoError(t, err)
	oldRev, oldCluster, oldMember := st.Header.Revision, st.Header.ClusterId, st.Header.MemberId
	old.stop(t)

	snap := filepath.Join(dir, "survivor.db")
	stats, err := SaveDB(filepath.Join(data, "member", "snap", "db"), snap)
	require.NoError(t, err)
	assert.Equal(t, oldRev, stats.Revision, "the copy holds the survivor's revision")
	assert.GreaterOrEqual(t, stats.Keys, 50)

	// A restore's node receives the snapshot and checks it against the
	// token's SHA-256.
	f, err := os.Open(snap)
	require.NoError(t, err)
	_, err = ReceiveSnapshot(f, filepath.Join(dir, "wrong.db"), strings.Repeat("0", 64))
	f.Close()
	assert.ErrorContains(t, err, "the restore's token names 0000")
	assert.NoFileExists(t, filepath.Join(dir, "wrong.db"))
	f, err = os.Open(snap)
	require.NoError(t, err)
	got, err := ReceiveSnapshot(f, filepath.Join(dir, "received.db"), stats.SHA256)
	f.Close()
	require.NoError(t, err)
	assert.Equal(t, stats, got)
	_, err = ReceiveSnapshot(strings.NewReader("not a snapshot"), filepath.Join(dir, "junk.db"), stats.SHA256)
	assert.ErrorContains(t, err, "not a database followed by its SHA-256")

	require.NoError(t, os.Rename(filepath.Join(data, "member"), filepath.Join(dir, "aside")))
	work := filepath.Join(dir, "restore")
	// What an interrupted restore left behind is redone.
	require.NoError(t, os.MkdirAll(filepath.Join(work, "member", "wal"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(work, "member", "wal", "junk.wal"), []byte("half"), 0o600))
	m := Member{Name: "n1", PeerURL: "http://127.0.0.1:" + strconv.Itoa(peer), Token: "c1-recover-1"}
	require.NoError(t, Restore(snap, data, work, m, DefaultBump))
	assert.NoDirExists(t, work)
	err = Restore(snap, data, work, m, DefaultBump)
	assert.ErrorContains(t, err, "is not empty", "a second restore over the first is refused")

	restored := startEtcd(t, "n1", data, "ignored", peer, client)
	c = restored.dial(t)
	st, err = c.Status(ctx, restored.client)
	require.NoError(t, err)
	assert.NotEqual(t, oldCluster, st.Header.ClusterId, "a new cluster ID")
	assert.NotEqual(t, oldMember, st.Header.MemberId, "a new member ID")
	assert.GreaterOrEqual(t, st.Header.Revision, oldRev+DefaultBump, "the revision never goes back")
	gr, err := c.Get(ctx, "k", clientv3.WithPrefix())
	require.NoError(t, err)
	kv := map[string]string{}
	for _, e := range gr.Kvs {
		kv[string(e.Key)] = string(e.Value)
	}
	assert.Equal(t, want, kv, "every key reads back")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	wr := <-c.Watch(wctx, "k", clientv3.WithPrefix(), clientv3.WithRev(oldRev))
	assert.ErrorIs(t, wr.Err(), rpctypes.ErrCompacted, "a watch from the old revision is told to read again")
	_, err = c.Put(ctx, "after", "1")
	assert.NoError(t, err, "the restored member takes writes")
}
