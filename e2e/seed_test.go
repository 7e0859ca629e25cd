package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/qemu"
	"github.com/etcdbox/etcdbox/seed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBadSeed boots a node that has data with a bad seed baked into its
// image: the console must name the bad key, etcd must not start, and
// DATA must come through unchanged, so that the node serves its old data
// once the seed is fixed.
//
// An upgrade to an image with a bad seed is what an operator would do;
// here it is done by copying the ESP (which carries the initrd, and in it
// the seed) of a bad image over the node's ESP, leaving the GPT and DATA
// as they are.
func TestBadSeed(t *testing.T) {
	// One VM, after the cluster tests (e2e/schedule_test.go).
	oneVMTest(t, lanePower)
	pkiDir, img := fixture(t)
	work := t.TempDir()

	// The bad seeds are the shared image's seed (see fixture) with one flaw.
	good, err := os.ReadFile(filepath.Join(pkiDir, "..", "e2e-seed.yaml"))
	require.NoError(t, err)
	require.NotContains(t, string(good), "\napi:", "the good seed already has an api key")
	malformed := bytes.Replace(good, []byte("cluster: e2e\n"), []byte("cluster: \"Bad_Name\"\n"), 1)
	require.NotEqual(t, good, malformed, "no cluster line in the seed:\n%s", good)
	bad := []struct {
		name string
		seed []byte
		want string // in the console's seed error line
	}{
		{"unknown key", append(bytes.Clone(good), "api:\n  portt: 1\n"...), "api.portt: unknown key"},
		{"malformed value", malformed, `cluster: "Bad_Name" is not a valid cluster name`},
	}
	images := make([]string, len(bad))
	for i, b := range bad {
		_, err := seed.Parse(b.seed)
		require.ErrorContains(t, err, b.want, "the %s seed is not bad the way this test expects", b.name)
		seedFile := filepath.Join(work, strings.ReplaceAll(b.name, " ", "-")+".yaml")
		require.NoError(t, os.WriteFile(seedFile, b.seed, 0o600))
		images[i] = filepath.Join(work, strings.ReplaceAll(b.name, " ", "-")+".img")
		require.NoError(t, buildImage(t, images[i], seedFile), "build the %s image", b.name)
	}

	// A raw copy of the good image, so that the test can write the ESP.
	n := newNode(t, img)
	n.cfg.Overlay = false
	disk := filepath.Join(n.cfg.Dir, "disk.raw")

	start := time.Now()
	n.boot(t)
	m := n.wait(t, 0, "etcdbox: etcd: bootstrapping member", bootDeadline)
	n.wait(t, m.Next, "etcdbox: etcd ready", bootDeadline)
	t.Logf("first boot to etcd ready: %s", time.Since(start).Round(time.Second))
	out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "put", "seed/k", "v1")
	require.NoError(t, err, out)
	n.powerOff(t, 90*time.Second)

	// All images come from the same builder: the ESP is where it is on
	// the node's disk, whose first boot grew only DATA.
	esp := gptPartition(t, readGPT(t, disk), espLabel)
	for _, i := range append([]string{img}, images...) {
		p := gptPartition(t, readGPT(t, i), espLabel)
		require.Equal(t, esp.GetStart(), p.GetStart(), "ESP start in %s", i)
		require.Equal(t, esp.GetSize(), p.GetSize(), "ESP size in %s", i)
	}
	nodeESP := filepath.Join(work, "node-esp.bin")
	copyRange(t, nodeESP, 0, disk, esp.GetStart(), esp.GetSize())
	before := dataFiles(t, disk)
	t.Logf("DATA holds %d files and directories: %v", len(before), slices.Sorted(maps.Keys(before)))
	require.Contains(t, before, "state/seed.yaml", "DATA has no cached seed")
	require.Equal(t, sha(good), before["state/seed.yaml"], "DATA's cached seed is not the good seed")

	for i, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			copyRange(t, disk, esp.GetStart(), images[i], esp.GetStart(), esp.GetSize())
			n.boot(t)
			stopOnFailure(t, n)
			// A seed taken is a failure at once, not after bootDeadline.
			m := waitText(t, n, 0, bootDeadline, "etcdbox: seed error:", "etcdbox: seed: from")
			require.Equal(t, "etcdbox: seed error:", m.Text, "a bad seed was taken: %s", m.Line)
			t.Log(m.Line)
			assert.Contains(t, m.Line, b.want, "the seed error does not name the bad key")
			assert.Contains(t, m.Line, "/etc/etcdbox/seed.yaml", "the seed error does not say which seed")
			waitText(t, n, m.Next, time.Minute, "etcdbox: waiting: power off, fix the problem and boot again")

			out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "endpoint", "health")
			assert.Error(t, err, "etcd answers on a node with a bad seed: %s", out)

			// The power button works while the node waits.
			n.powerOff(t, 90*time.Second)
			log := n.vm.Console()
			for _, s := range []string{
				"etcdbox: seed: from",               // a seed was accepted
				"etcdbox: configure network: done",  // boot went on past the seed
				"etcdbox: issue certificates: done", //
				"etcdbox: etcd: ",                   // etcd was set up
				"etcdbox: etcd ready",               //
				"etcdmain",                          // etcd's own log
			} {
				assert.NotContains(t, log, s, "the node went on with a bad seed")
			}
			assert.Equal(t, 1, strings.Count(log, "etcdbox: seed error:"), "the node did not wait at the first seed error (rebooted?)")
			assert.Equal(t, before, dataFiles(t, disk), "DATA changed on a boot with a bad seed")
		})
	}

	t.Run("fixed seed: the node serves its old data", func(t *testing.T) {
		copyRange(t, disk, esp.GetStart(), nodeESP, 0, esp.GetSize())
		n.boot(t)
		stopOnFailure(t, n)
		m := n.wait(t, 0, "etcdbox: seed: from image", bootDeadline)
		m = n.wait(t, m.Next, "etcdbox: etcd: restarting member", bootDeadline)
		n.wait(t, m.Next, "etcdbox: etcd ready", bootDeadline)
		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "seed/k", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v1", out)
		n.powerOff(t, 90*time.Second)
	})
}

// waitText waits for a console line holding one of texts after offset
// from. Unlike node.wait it does not stop at "etcdbox: fatal:", which an
// operator error prints before the node waits.
func waitText(t *testing.T, n *node, from int64, within time.Duration, texts ...string) qemu.ConsoleMatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	m, err := n.vm.WaitConsole(ctx, from, texts...)
	require.NoError(t, err, "console tail:\n%s", n.vm.ConsoleTail(40))
	return m
}

// stopOnFailure stops the node's VM when subtest t fails, so that the
// next subtest can boot it again; node.boot stops it only at the end of
// the whole test.
func stopOnFailure(t *testing.T, n *node) {
	vm := n.vm
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = vm.Stop(ctx, 10*time.Second)
	})
}

// copyRange copies size bytes at srcOff of src to dstOff of dst, which is
// created if missing.
func copyRange(t *testing.T, dst string, dstOff int64, src string, srcOff, size int64) {
	t.Helper()
	in, err := os.Open(src)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer out.Close()
	n, err := io.CopyBuffer(io.NewOffsetWriter(out, dstOff), io.NewSectionReader(in, srcOff, size), make([]byte, sizeMiB))
	require.NoError(t, err, "copy %s to %s", src, dst)
	require.Equal(t, size, n, "copy %s to %s", src, dst)
	require.NoError(t, out.Close())
}

// dataFiles reads DATA of the raw disk offline, after checking it with
// e2fsck -fn, and returns its files: path -> sha256 of the content, "dir"
// for a directory.
func dataFiles(t *testing.T, disk string) map[string]string {
	t.Helper()
	p := gptPartition(t, readGPT(t, disk), dataLabel)
	work := t.TempDir()
	part := filepath.Join(work, "data.raw")
	extractPartition(t, disk, "raw", p.GetStart(), p.GetSize(), part)
	fsck(t, part)
	dump := filepath.Join(work, "files")
	require.NoError(t, os.Mkdir(dump, 0o755))
	hostRun(t, "debugfs", "-R", "rdump / "+dump, part)
	files := map[string]string{}
	require.NoError(t, filepath.WalkDir(dump, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dump {
			return err
		}
		rel, err := filepath.Rel(dump, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			files[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		files[rel] = sha(b)
		return err
	}))
	// debugfs reports errors on stderr but exits 0; an empty dump would
	// make any comparison pass.
	require.Contains(t, files, "etcd/member/wal", "DATA has no etcd WAL: %v", files)
	return files
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
