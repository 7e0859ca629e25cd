package storage

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdbox/etcdbox/init/supervise"
	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostTools returns Tools for the host's e2fsprogs, which the initramfs
// copies.
func hostTools(t *testing.T) *Tools {
	t.Helper()
	for _, b := range []string{"mke2fs", "e2fsck", "resize2fs"} {
		testenv.File(t, filepath.Join(DefaultToolDir, b), "install e2fsprogs")
	}
	return &Tools{}
}

// runTool runs a program for a test through the reaper, as the code under
// test runs e2fsprogs: once the reaper runs, it reaps every child of the
// test process, and exec.Cmd.Wait would find its own child gone ("waitid:
// no child processes").
func runTool(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	return supervise.CombinedOutput(t.Context(), exec.Command(name, args...))
}

// sizedFile makes a file of size bytes (sparse zeros) and returns its path.
func sizedFile(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "part.img")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	require.NoError(t, os.Truncate(p, size))
	return p
}

// mkfsHost makes an ext4 on a new file with the host's mke2fs.
func mkfsHost(t *testing.T, size int64) string {
	t.Helper()
	p := sizedFile(t, size)
	out, err := runTool(t, filepath.Join(DefaultToolDir, "mke2fs"), "-q", "-F", "-t", "ext4", p)
	require.NoError(t, err, "%s", out)
	return p
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

func TestProbe(t *testing.T) {
	hostTools(t)
	for _, tt := range []struct {
		name string
		make func(t *testing.T) string
		want State
	}{
		{"placeholder of zeros", func(t *testing.T) string { return sizedFile(t, 64*mib) }, Blank},
		{"zeros in the first MiB only", func(t *testing.T) string {
			p := sizedFile(t, 4*mib)
			writeAt(t, p, 2*mib, []byte("data beyond the first MiB"))
			return p
		}, Blank},
		{"ext4", func(t *testing.T) string { return mkfsHost(t, 16*mib) }, Ext4},
		{"one byte in the first MiB", func(t *testing.T) string {
			p := sizedFile(t, 64*mib)
			writeAt(t, p, mib-1, []byte{1})
			return p
		}, Unknown},
		{"xfs-like superblock", func(t *testing.T) string {
			p := sizedFile(t, 64*mib)
			writeAt(t, p, 0, []byte("XFSB"))
			return p
		}, Unknown},
		{"ext4 magic at the wrong place", func(t *testing.T) string {
			p := sizedFile(t, 64*mib)
			writeAt(t, p, 1082, []byte{0x53, 0xEF})
			return p
		}, Unknown},
		{"shorter than a MiB", func(t *testing.T) string { return sizedFile(t, 4096) }, Unknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Probe(tt.make(t))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got, "Probe = %v, want %v", got, tt.want)
		})
	}
	_, err := Probe(filepath.Join(t.TempDir(), "missing"))
	assert.ErrorContains(t, err, "probe ")
}

// recordRun is a Run seam that records command lines and answers with a
// fixed exit code.
type recordRun struct {
	calls []string
	code  int
	out   string
	err   error
}

func (r *recordRun) run(name string, args ...string) ([]byte, int, error) {
	r.calls = append(r.calls, name+" "+strings.Join(args, " "))
	return []byte(r.out), r.code, r.err
}

func TestToolsCommandLines(t *testing.T) {
	rec := &recordRun{}
	tools := &Tools{Run: rec.run}
	require.NoError(t, tools.Mkfs("/dev/vda2", DataFSLabel))
	_, err := tools.Fsck("/dev/vda2")
	require.NoError(t, err)
	require.NoError(t, tools.Grow("/dev/vda2"))
	assert.Equal(t, []string{
		"/usr/sbin/mke2fs -q -F -t ext4 -L etcdbox-data -E lazy_itable_init=1,lazy_journal_init=1,nodiscard /dev/vda2",
		"/usr/sbin/e2fsck -p /dev/vda2",
		"/usr/sbin/resize2fs /dev/vda2",
	}, rec.calls)

	rec.calls = nil
	tools.Dir = "/initramfs/sbin"
	_, _ = tools.Fsck("/dev/sda2")
	assert.Equal(t, []string{"/initramfs/sbin/e2fsck -p /dev/sda2"}, rec.calls)
}

func TestFsckExitCodes(t *testing.T) {
	for _, tt := range []struct {
		name       string
		code       int
		runErr     error
		wantRepair bool
		wantErr    string
	}{
		{name: "clean", code: 0},
		{name: "errors corrected", code: 1},
		{name: "corrected, reboot recommended", code: 2},
		{name: "uncorrected", code: 4, wantRepair: true, wantErr: "exit status 4 (errors left uncorrected)"},
		{name: "corrected some, not all", code: 5, wantRepair: true, wantErr: "errors corrected, errors left uncorrected"},
		{name: "operational error", code: 8, wantRepair: true, wantErr: "operational error"},
		{name: "library error", code: 128, wantRepair: true, wantErr: "shared library error"},
		{name: "could not run", code: -1, runErr: errors.New("exec: no such file"), wantErr: "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordRun{code: tt.code, out: "e2fsck says hi\n", err: tt.runErr}
			res, err := (&Tools{Run: rec.run}).Fsck("/dev/vda2")
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.code, res.Code)
				assert.Equal(t, "e2fsck says hi\n", res.Output)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.wantRepair, errors.Is(err, ErrNeedsRepair), "errors.Is(%v, ErrNeedsRepair)", err)
			assert.ErrorContains(t, err, tt.wantErr)
			assert.ErrorContains(t, err, "e2fsck says hi", "the error carries the output")
		})
	}
}

func TestMkfsFailure(t *testing.T) {
	rec := &recordRun{code: 1, out: "mke2fs: Device size reported to be zero."}
	err := (&Tools{Run: rec.run}).Mkfs("/dev/vda2", DataFSLabel)
	assert.ErrorContains(t, err, "mke2fs /dev/vda2: exit status 1: mke2fs: Device size reported to be zero.")
	rec = &recordRun{code: 1, out: "resize2fs: Bad magic number"}
	err = (&Tools{Run: rec.run}).Grow("/dev/vda2")
	assert.ErrorContains(t, err, "resize2fs /dev/vda2: exit status 1: resize2fs: Bad magic number")
}

// TestE2fsprogsRoundTrip runs the real tools on a file: format, probe,
// check, enlarge, grow, check again.
func TestE2fsprogsRoundTrip(t *testing.T) {
	tools := hostTools(t)
	p := sizedFile(t, 32*mib)
	require.NoError(t, tools.Mkfs(p, DataFSLabel))

	st, err := Probe(p)
	require.NoError(t, err)
	assert.Equal(t, Ext4, st)
	size, err := ext4Size(p)
	require.NoError(t, err)
	assert.Equal(t, 32*mib, size)
	sb := make([]byte, 16)
	f, err := os.Open(p)
	require.NoError(t, err)
	_, err = f.ReadAt(sb, 1024+0x78) // s_volume_name
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, DataFSLabel, strings.TrimRight(string(sb), "\x00"))

	res, err := tools.Fsck(p)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Code)

	for _, grown := range []int64{96 * mib, 200 * mib} {
		require.NoError(t, os.Truncate(p, grown))
		require.NoError(t, tools.Grow(p))
		size, err = ext4Size(p)
		require.NoError(t, err)
		assert.Equal(t, grown, size, "ext4 fills the enlarged file")
		out, err := runTool(t, filepath.Join(DefaultToolDir, "e2fsck"), "-fn", p)
		assert.NoError(t, err, "e2fsck -fn after growing to %d: %s", grown, out)
	}
}

// TestFsckReal classifies real e2fsck runs on a clean, an uncleanly
// unmounted and a broken filesystem. debugfs (e2fsprogs) does the damage.
func TestFsckReal(t *testing.T) {
	tools := hostTools(t)
	debugfs := testenv.File(t, filepath.Join(DefaultToolDir, "debugfs"), "install e2fsprogs")
	for _, tt := range []struct {
		name       string
		damage     []string // debugfs -w requests
		wantCode   int
		wantRepair bool
	}{
		{name: "clean", wantCode: 0},
		// A power cut: the state says not cleanly unmounted; preen checks
		// and fixes it.
		{name: "not cleanly unmounted", damage: []string{"ssv state 0"}, wantCode: 1},
		// The root inode is a regular file and the fs is flagged with
		// errors: preen must stop ("UNEXPECTED INCONSISTENCY").
		{name: "root inode not a directory", damage: []string{"sif <2> mode 0100644", "ssv state 2"}, wantRepair: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mkfsHost(t, 32*mib)
			for _, req := range tt.damage {
				out, err := runTool(t, debugfs, "-w", "-R", req, p)
				require.NoError(t, err, "debugfs %s: %s", req, out)
			}
			res, err := tools.Fsck(p)
			if tt.wantRepair {
				require.ErrorIs(t, err, ErrNeedsRepair)
				assert.ErrorContains(t, err, "Root inode is not a directory")
				assert.ErrorContains(t, err, p)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantCode, res.Code, "e2fsck -p exit code; output: %s", res.Output)
		})
	}
}
