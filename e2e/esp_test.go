package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/qemu"
)

// The ESP's place on the builder's disks (CONTRACTS "Disk").
const (
	espOffset = 1 << 20
	espBytes  = 512 << 20
)

// espFile is one file of a node's ESP.
type espFile struct {
	sha256 string
	data   []byte // entries and loader.conf only: kernels and initrds are big
}

// readESP returns every file of the ESP of vm's disk, by path, read while
// the VM runs: qemu-img shares the disk QEMU holds (-U) and copies out the
// partition, as the guest last wrote it.
func readESP(t *testing.T, vm *qemu.VM) map[string]espFile {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "esp.raw")
	qemuImg(t, "convert", "-U", "-O", "raw", "--image-opts",
		"driver=raw,offset="+strconv.Itoa(espOffset)+",size="+strconv.Itoa(espBytes)+
			",file.driver=qcow2,file.file.filename="+optEscape(filepath.Join(vm.Dir(), "disk.qcow2")), raw)
	return espFiles(t, raw, vm.Name())
}

// settledESP is readESP once two reads a few seconds apart agree: the
// host sees the guest's writes to its ESP only once the guest flushes them
// (a slot blessed just before showed its entry empty to a first read), so
// a comparison starts from what the guest has on its disk.
func settledESP(t *testing.T, vm *qemu.VM) map[string]espFile {
	t.Helper()
	prev := readESP(t, vm)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		time.Sleep(3 * time.Second) // between two reads, bounded by the deadline
		cur := readESP(t, vm)
		if reflect.DeepEqual(prev, cur) {
			return cur
		}
		require.True(t, time.Now().Before(deadline), "the ESP of %s still changes after 2m", vm.Name())
		prev = cur
	}
}

// espFiles returns every file of the FAT filesystem image at raw (the ESP
// of node).
func espFiles(t *testing.T, raw, node string) map[string]espFile {
	t.Helper()
	f, err := os.Open(raw)
	require.NoError(t, err)
	defer f.Close()
	fsys, err := fat32.Read(file.New(f, true), espBytes, 0, 512)
	require.NoError(t, err, "the ESP of %s", node)
	files := map[string]espFile{}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		// go-diskfs cannot open an empty file (no first cluster).
		var b []byte
		if info, err := d.Info(); err != nil {
			return err
		} else if info.Size() > 0 {
			if b, err = fs.ReadFile(fsys, p); err != nil {
				return err
			}
		}
		sum := sha256.Sum256(b)
		ef := espFile{sha256: hex.EncodeToString(sum[:])}
		if len(b) < 4096 {
			ef.data = b
		}
		files[p] = ef
		return nil
	})
	require.NoError(t, err, "walk the ESP of %s", node)
	return files
}

// slotFiles are the files of files that belong to slot: its directory,
// its records and its boot entries.
func slotFiles(files map[string]espFile, slot string) map[string]espFile {
	out := map[string]espFile{}
	for p, f := range files {
		if strings.HasPrefix(p, "etcdbox/"+slot+"/") || strings.HasPrefix(p, "etcdbox/"+slot+".") || strings.HasPrefix(p, "loader/entries/etcdbox-"+slot) {
			out[p] = f
		}
	}
	return out
}
