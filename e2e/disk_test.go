package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

const (
	sizeMiB     = int64(1) << 20
	sizeGiB     = int64(1) << 30
	sectorSize  = 512
	espLabel    = "ETCDBOX-ESP"
	dataLabel   = "ETCDBOX-DATA"
	dataFSLabel = "etcdbox-data"
	// backupGPT is the room the backup GPT needs at the disk's end: 32
	// sectors of partition entries and the header.
	backupGPT = 33 * sectorSize
)

// dataLineRE matches init's DATA report after PrepareData.
var dataLineRE = regexp.MustCompile(`DATA: (\S+), (\d+) MiB filesystem \(formatted (true|false), partition grown (true|false), filesystem grown (true|false)\)`)

// dataReport is init's "etcdbox: DATA: ..." console line, parsed.
type dataReport struct {
	dev                           string
	fsMiB                         int64
	formatted, partGrown, fsGrown bool
}

func parseDataLine(t *testing.T, line string) dataReport {
	t.Helper()
	m := dataLineRE.FindStringSubmatch(line)
	require.NotNil(t, m, "DATA line %q does not match %s", line, dataLineRE)
	size, err := strconv.ParseInt(m[2], 10, 64)
	require.NoError(t, err)
	return dataReport{dev: m[1], fsMiB: size, formatted: m[3] == "true", partGrown: m[4] == "true", fsGrown: m[5] == "true"}
}

// TestDiskGrows boots a node on a disk enlarged after the build, then
// enlarges the disk again while the node is off, as a cloud volume resize
// does. Each boot must grow DATA to the disk's end and keep the data; the
// host then checks the partition table and the filesystem offline.
func TestDiskGrows(t *testing.T) {
	// One VM, after the cluster tests (e2e/schedule_test.go).
	oneVMTest(t, laneSlots)
	pkiDir, img := fixture(t)
	dataStart := gptPartition(t, readGPT(t, img), dataLabel).GetStart()
	// wantFSMiB is DATA's size in MiB when it fills a disk of size bytes
	// (partitions end on a MiB boundary before the backup GPT).
	wantFSMiB := func(disk int64) int64 { return (disk - sizeMiB - dataStart) / sizeMiB }

	n := newNode(t, img)
	n.cfg.DiskSize = 4 * sizeGiB

	t.Run("first boot fills a 4 GiB disk", func(t *testing.T) {
		start := time.Now()
		n.boot(t)
		m := n.wait(t, 0, "etcdbox: DATA: ", bootDeadline)
		t.Log(m.Line)
		rep := parseDataLine(t, m.Line)
		assert.True(t, rep.formatted, "first boot must format the placeholder: %s", m.Line)
		assert.True(t, rep.partGrown, "first boot must grow the partition: %s", m.Line)
		assert.Equal(t, wantFSMiB(4*sizeGiB), rep.fsMiB, "filesystem size: %s", m.Line)
		n.wait(t, m.Next, "etcdbox: etcd ready", bootDeadline)
		t.Logf("boot to etcd ready: %s", time.Since(start).Round(time.Second))

		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "put", "grow/k", "v1")
		require.NoError(t, err, out)
		n.powerOff(t, 90*time.Second)
	})
	if t.Failed() {
		return
	}

	t.Run("after growing the disk to 6 GiB, DATA grows online and keeps the data", func(t *testing.T) {
		n.cfg.DiskSize = 6 * sizeGiB
		start := time.Now()
		n.boot(t)
		m := n.wait(t, 0, "etcdbox: DATA: ", bootDeadline)
		t.Log(m.Line)
		// resize2fs runs after the mount: the filesystem grows online.
		assert.Contains(t, n.vm.Console()[:m.Offset], "etcdbox: storage: growing the filesystem on")
		rep := parseDataLine(t, m.Line)
		assert.False(t, rep.formatted, "a second boot must never format: %s", m.Line)
		assert.True(t, rep.partGrown, "the partition must grow: %s", m.Line)
		assert.True(t, rep.fsGrown, "the filesystem must grow (resize2fs): %s", m.Line)
		assert.Equal(t, wantFSMiB(6*sizeGiB), rep.fsMiB, "filesystem size: %s", m.Line)
		r := n.wait(t, m.Next, "etcdbox: etcd: restarting member", bootDeadline)
		n.wait(t, r.Next, "etcdbox: etcd ready", bootDeadline)
		t.Logf("boot to etcd ready: %s", time.Since(start).Round(time.Second))

		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "grow/k", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v1", out)
		n.powerOff(t, 90*time.Second)
	})
	if t.Failed() {
		return
	}

	t.Run("offline: DATA fills the disk and e2fsck -fn is clean", func(t *testing.T) {
		disk := filepath.Join(n.cfg.Dir, "disk.qcow2")
		work := t.TempDir()
		// The whole disk as a sparse raw file, to read its GPT as a
		// firmware would.
		raw := filepath.Join(work, "disk.raw")
		qemuImg(t, "convert", "-O", "raw", "-f", "qcow2", disk, raw)
		fi, err := os.Stat(raw)
		require.NoError(t, err)
		require.Equal(t, 6*sizeGiB, fi.Size(), "disk size")

		table := readGPT(t, raw)
		assert.False(t, table.RecoveredFromBackup, "the primary GPT is damaged; it was read from the backup")
		p := gptPartition(t, table, dataLabel)
		assert.Equal(t, dataStart, p.GetStart(), "DATA moved")
		end := p.GetStart() + p.GetSize()
		assert.LessOrEqual(t, end, fi.Size()-backupGPT, "DATA overlaps the backup GPT")
		assert.LessOrEqual(t, fi.Size()-end, sizeMiB, "DATA ends %d bytes before the disk's end; want at most 1 MiB", fi.Size()-end)
		assertBackupGPT(t, raw, fi.Size())

		part := filepath.Join(work, "data.raw")
		extractPartition(t, disk, "qcow2", p.GetStart(), p.GetSize(), part)
		fsck(t, part)
		fsBytes, label := ext4Size(t, part)
		t.Logf("disk %d bytes; DATA at %d, %d bytes; ext4 %d bytes", fi.Size(), p.GetStart(), p.GetSize(), fsBytes)
		assert.Equal(t, dataFSLabel, label, "filesystem label")
		assert.LessOrEqual(t, fsBytes, p.GetSize(), "the filesystem is larger than its partition")
		// Init counts DATA as full when less than a MiB is left over; more
		// would make it run resize2fs on every boot.
		assert.Less(t, p.GetSize()-fsBytes, sizeMiB, "the filesystem (%d bytes) does not fill its partition (%d bytes)", fsBytes, p.GetSize())
	})
}

// readGPT reads the GPT of the raw disk image at path.
func readGPT(t *testing.T, path string) *gpt.Table {
	t.Helper()
	d, err := diskfs.Open(path, diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err, "open %s", path)
	defer d.Close()
	pt, err := d.GetPartitionTable()
	require.NoError(t, err, "partition table of %s", path)
	table, ok := pt.(*gpt.Table)
	require.True(t, ok, "partition table of %s is %T, want GPT", path, pt)
	return table
}

// gptPartition returns the partition named name.
func gptPartition(t *testing.T, table *gpt.Table, name string) *gpt.Partition {
	t.Helper()
	for _, p := range table.Partitions {
		if p.Type != gpt.Unused && p.Name == name {
			return p
		}
	}
	require.FailNow(t, "no partition "+name)
	return nil
}

// assertBackupGPT checks that the raw disk at path of size bytes has a
// backup GPT header in its last sector, and that it says so.
func assertBackupGPT(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	hdr := make([]byte, sectorSize)
	_, err = f.ReadAt(hdr, size-sectorSize)
	require.NoError(t, err)
	require.Equal(t, "EFI PART", string(hdr[:8]), "no backup GPT header in the disk's last sector")
	lastLBA := uint64(size/sectorSize - 1)
	assert.Equal(t, lastLBA, binary.LittleEndian.Uint64(hdr[24:32]), "backup GPT header: my LBA")
	assert.Equal(t, uint64(1), binary.LittleEndian.Uint64(hdr[32:40]), "backup GPT header: alternate LBA")
}

// extractPartition writes bytes [off, off+size) of disk, in format (raw or
// qcow2, with any backing file), to the sparse raw file out.
func extractPartition(t *testing.T, disk, format string, off, size int64, out string) {
	t.Helper()
	file := "file.driver=file,file.filename=" + optEscape(disk)
	if format == "qcow2" {
		file = "file.driver=qcow2,file.file.filename=" + optEscape(disk)
	}
	qemuImg(t, "convert", "-O", "raw", "--image-opts",
		"driver=raw,offset="+strconv.FormatInt(off, 10)+",size="+strconv.FormatInt(size, 10)+","+file, out)
	fi, err := os.Stat(out)
	require.NoError(t, err)
	require.Equal(t, size, fi.Size(), "extracted partition size")
}

// optEscape doubles commas, QEMU's escape inside option values.
func optEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	hostRun(t, "qemu-img", args...)
}

// hostRun runs a host tool and fails the test if it does not exit 0.
func hostRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "%s %s:\n%s", name, strings.Join(args, " "), out.String())
	return out.String()
}

// fsck runs e2fsck -fn (full check, change nothing) on the filesystem
// image at path and fails unless it is clean (exit 0).
func fsck(t *testing.T, path string) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("e2fsck", "-fn", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	assert.NoError(t, err, "e2fsck -fn %s is not clean:\n%s", path, out.String())
}

// ext4Size returns the size in bytes and the label of the ext4
// filesystem image at path, from dumpe2fs -h.
func ext4Size(t *testing.T, path string) (int64, string) {
	t.Helper()
	out := hostRun(t, "dumpe2fs", "-h", path)
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `:\s*(.*)$`).FindStringSubmatch(out)
		require.NotNil(t, m, "dumpe2fs -h %s: no %q:\n%s", path, name, out)
		return strings.TrimSpace(m[1])
	}
	count, err := strconv.ParseInt(field("Block count"), 10, 64)
	require.NoError(t, err)
	bs, err := strconv.ParseInt(field("Block size"), 10, 64)
	require.NoError(t, err)
	return count * bs, field("Filesystem volume name")
}
