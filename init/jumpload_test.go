package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/init/slot"
)

// fakeKexec stands for kexec_file_load: it records each load's files, by
// content, and its command line, and can hold a load or fail it.
type fakeKexec struct {
	mu    sync.Mutex
	loads []string // "kernel|initrd|cmdline"
	hold  chan struct{}
	fail  error
}

func (f *fakeKexec) load(kernel, initrd, cmdline string) error {
	if f.hold != nil {
		<-f.hold
	}
	k, err := os.ReadFile(kernel)
	if err != nil {
		return err
	}
	i, err := os.ReadFile(initrd)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.loads = append(f.loads, string(k)+"|"+string(i)+"|"+cmdline)
	return nil
}

func (f *fakeKexec) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.loads)
}

func (f *fakeKexec) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loads[len(f.loads)-1]
}

// jumpNode is a node booted from slot a of an ESP in a directory, with
// kexec faked.
func jumpNode(t *testing.T) (*node, *fakeKexec) {
	t.Helper()
	n := newNode()
	dir := t.TempDir()
	for p, data := range map[string]string{
		"loader/entries/etcdbox-a.conf": "title etcdbox (slot a)\nversion 1\nsort-key etcdbox\nlinux /etcdbox/a/vmlinuz\ninitrd /etcdbox/a/initrd\noptions console=ttyS0 panic=10 etcdbox.slot=a\n",
		"etcdbox/a/vmlinuz":             "old kernel",
		"etcdbox/a/initrd":              "old initrd",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
	}
	n.esp = slot.Dir(dir)
	n.cmdline = map[string]string{"etcdbox.slot": "a"}
	k := &fakeKexec{}
	n.jumps = newJumpLoad(n.esp, n.log.Printf)
	n.jumps.load = k.load
	return n, k
}

// stageB writes kernel and initrd into slot b held, as the upgrade agent
// does (its hooks included), and returns the entry's command line and
// the record.
func stageB(t *testing.T, n *node, kernel, initrd string) (string, slot.Image) {
	t.Helper()
	n.jumps.writing("b")
	e, err := slot.Stage(n.esp, "b", slot.Update{Kernel: strings.NewReader(kernel), Initrd: strings.NewReader(initrd), Options: "console=ttyS0 panic=10 etcdbox.slot=a", Hold: true})
	require.NoError(t, err)
	rec := slot.Image{Digest: "sha256:" + hexSum(kernel+initrd), Kernel: hexSum(kernel), Initrd: hexSum(initrd)}
	require.NoError(t, slot.WriteImage(n.esp, "b", rec))
	return e.Options, rec
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// logSince is what n logged after seq.
func logSince(n *node, seq uint64) string {
	lines, _, _ := n.ring.Since(seq, 1000)
	return strings.Join(lines, "\n")
}

// armAndPlan arms slot b and plans the reboot's jump into it, as the
// shutdown would.
func armAndPlan(t *testing.T, n *node) {
	t.Helper()
	_, err := slot.Arm(n.esp, "b")
	require.NoError(t, err)
	require.True(t, n.planJump(false).ready, "the reboot jumps into slot b")
}

// waitBusy waits for a load to be under way.
func waitBusy(t *testing.T, n *node) {
	t.Helper()
	require.Eventually(t, func() bool {
		n.jumps.mu.Lock()
		defer n.jumps.mu.Unlock()
		return n.jumps.busy != nil
	}, 10*time.Second, time.Millisecond)
}

// waitLoads waits for the fake kexec to have loaded want times.
func waitLoads(t *testing.T, k *fakeKexec, want int) {
	t.Helper()
	require.Eventually(t, func() bool { return k.count() == want }, 10*time.Second, 5*time.Millisecond, "loads: want %d", want)
}

// TestJumpUsesTheKernelLoadedAhead: a staging loads its slot's kernel
// for the kexec in the background, and the reboot's jump plan uses it
// without loading again; it loads again whenever what is on the ESP is
// not what was loaded.
func TestJumpUsesTheKernelLoadedAhead(t *testing.T) {
	t.Run("loaded once, at staging", func(t *testing.T) {
		n, k := jumpNode(t)
		opts, rec := stageB(t, n, "new kernel", "new initrd")
		n.jumps.preload("b", opts, rec)
		waitLoads(t, k, 1)

		from := n.ring.Seq()
		armAndPlan(t, n)
		assert.Equal(t, 1, k.count(), "the jump loads nothing more")
		assert.Equal(t, "new kernel|new initrd|console=ttyS0 panic=10 etcdbox.slot=b", k.last())
		assert.Contains(t, logSince(n, from), "its kernel and initrd loaded ahead, at staging")
	})
	t.Run("staged again with another image", func(t *testing.T) {
		n, k := jumpNode(t)
		opts, rec := stageB(t, n, "new kernel", "new initrd")
		n.jumps.preload("b", opts, rec)
		waitLoads(t, k, 1)
		// A second staging, whose own load has not run (it failed, or
		// the reboot came first).
		stageB(t, n, "other kernel", "other initrd")

		from := n.ring.Seq()
		armAndPlan(t, n)
		assert.Equal(t, 2, k.count())
		assert.Equal(t, "other kernel|other initrd|console=ttyS0 panic=10 etcdbox.slot=b", k.last(), "the jump boots what the ESP holds")
		assert.Regexp(t, `its kernel and initrd loaded in \d`, logSince(n, from))
	})
	t.Run("a slot write during the load", func(t *testing.T) {
		n, k := jumpNode(t)
		opts, rec := stageB(t, n, "new kernel", "new initrd")
		k.hold = make(chan struct{})
		go n.jumps.preload("b", opts, rec)
		// The load reads the files only once let go; a new staging's
		// write begins meanwhile, with the same record, as a rotten
		// file pulled again would have.
		waitBusy(t, n)
		n.jumps.writing("b")
		close(k.hold)
		waitLoads(t, k, 1)
		armAndPlan(t, n)
		assert.Equal(t, 2, k.count(), "a load that a slot write overtook is not trusted")
	})
	t.Run("the jump waits for the load under way", func(t *testing.T) {
		n, k := jumpNode(t)
		opts, rec := stageB(t, n, "new kernel", "new initrd")
		_, err := slot.Arm(n.esp, "b")
		require.NoError(t, err)
		k.hold = make(chan struct{})
		go n.jumps.preload("b", opts, rec)
		waitBusy(t, n)
		planned := make(chan jumpPlan)
		go func() { planned <- n.planJump(false) }()
		select {
		case <-planned:
			t.Fatal("the jump plan ran a second load beside the one under way (the kernel refuses it: EBUSY)")
		case <-time.After(100 * time.Millisecond):
		}
		close(k.hold)
		require.True(t, (<-planned).ready)
		assert.Equal(t, 1, k.count(), "the jump used the load it waited for")
	})
	t.Run("a failed load ahead", func(t *testing.T) {
		n, k := jumpNode(t)
		opts, rec := stageB(t, n, "new kernel", "new initrd")
		k.fail = os.ErrPermission
		from := n.ring.Seq()
		n.jumps.preload("b", opts, rec) // the staging's last step: it returns once the load has failed
		assert.Contains(t, logSince(n, from), "upgrade: slot b's kernel not loaded ahead for its kexec (permission denied); the reboot loads it")
		k.fail = nil
		armAndPlan(t, n)
		assert.Equal(t, 1, k.count(), "the reboot loaded it")
	})
	t.Run("no record", func(t *testing.T) {
		n, k := jumpNode(t)
		opts, _ := stageB(t, n, "new kernel", "new initrd")
		require.NoError(t, slot.ClearRecords(n.esp, "b"))
		n.jumps.preload("b", opts, slot.Image{})
		waitLoads(t, k, 1)
		armAndPlan(t, n)
		assert.Equal(t, 2, k.count(), "without digests nothing counts as loaded")
	})
}
