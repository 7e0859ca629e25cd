package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/etcdutl/v3/etcdutl"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// offlineHash is what etcdutl hashkv says of a stopped member's database:
// the hash of its key-value store at its latest revision, and that
// revision. An online HashKV at revision 0 of the same data gives the
// same hash.
type offlineHash struct {
	Hash     uint32
	Revision int64
}

// memberDB copies etcd's database (bbolt) out of the DATA partition of
// the stopped node's qcow2 disk, and returns the copy's path.
func memberDB(t *testing.T, disk string) string {
	t.Helper()
	work := t.TempDir()
	raw := filepath.Join(work, "disk.raw")
	qemuImg(t, "convert", "-O", "raw", "-f", "qcow2", disk, raw)
	p := gptPartition(t, readGPT(t, raw), dataLabel)
	part := filepath.Join(work, "data.raw")
	extractPartition(t, disk, "qcow2", p.GetStart(), p.GetSize(), part)
	replayJournal(t, part)
	db := filepath.Join(work, "db")
	// The init runs etcd with --data-dir on DATA's etcd/.
	hostRun(t, "debugfs", "-R", "dump -p /etcd/member/snap/db "+db, part)
	return db
}

// hashDB hashes the database at path as etcdutl hashkv does.
func hashDB(t *testing.T, path string) offlineHash {
	t.Helper()
	b := backend.NewDefaultBackend(zap.NewNop(), path)
	defer b.Close()
	st := mvcc.NewStore(zap.NewNop(), b, &etcdutl.SimpleLessor{}, mvcc.StoreConfig{})
	defer st.Close()
	h, _, err := mvcc.NewHashStorage(zap.NewNop(), st).HashByRev(0)
	require.NoError(t, err, "hash %s", path)
	return offlineHash{Hash: h.Hash, Revision: h.Revision}
}

// replayJournal replays the ext4 journal of the filesystem image at path
// (a copy), as a mount would. debugfs reads the blocks in place and
// skips the journal: after a power cut, an inode that fdatasync
// committed to the journal (a file that grew, a block newly allocated)
// can still show its old self at home, and a file read through it is
// older than what the node had made durable.
func replayJournal(t *testing.T, path string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("e2fsck", "-E", "journal_only", "-y", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	// Exit 1: errors corrected, which a replay can report.
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		err = nil
	}
	require.NoError(t, err, "e2fsck -E journal_only %s:\n%s", path, out.String())
}
