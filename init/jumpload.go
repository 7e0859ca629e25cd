package main

import (
	"path/filepath"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/init/power"
	"github.com/etcdbox/etcdbox/init/slot"
)

// A kexec's kernel and initrd are loaded ahead, once a staging has
// written them, not in the shutdown: kexec_file_load hashes both (and
// checks the kernel's signature), which took 1.5-1.9 s of a 2.1-2.9 s
// shutdown under TCG, with the node already out of its cluster. Staging
// runs on every node before the first one reboots, so the load leaves
// each node's turn: it is the staging's last step (preload).
//
// This is safe because a loaded kernel runs only through the explicit
// kexec reboot (power.Kexec), which jump takes only after planJump has
// approved a freshly armed slot; a panic or a firmware reboot never runs
// it (nothing is loaded for a crash). planJump uses the loaded kernel
// only when it was loaded for the slot, command line and boot files
// (the digests the staging recorded) that the jump is about to boot,
// with no slot write begun since; anything else loads again, as before.
// What it costs: the kernel keeps the two files in memory until the
// reboot, or until a later load replaces them (about 19 MiB).

// jumpKey is what a loaded kexec boots: a slot's boot files, by the
// digests its staging recorded, and its kernel command line.
type jumpKey struct {
	slot, cmdline  string
	kernel, initrd string // sha256 of the boot files (slot.Image)
}

func keyOf(slotName, cmdline string, rec slot.Image) jumpKey {
	return jumpKey{slot: slotName, cmdline: cmdline, kernel: rec.Kernel, initrd: rec.Initrd}
}

// jumpLoad tracks the kexec load the kernel holds. The kernel runs one
// load at a time (EBUSY otherwise), so every load goes through it.
type jumpLoad struct {
	// load is power.LoadKexec; tests replace it.
	load func(kernel, initrd, cmdline string) error
	esp  slot.Dir
	logf func(format string, args ...any)

	mu sync.Mutex
	// gen counts slot writes begun; a load is valid only for the gen it
	// began under.
	gen uint64
	// loaded is what the kernel holds, valid while gen has not moved;
	// nil when unknown or nothing.
	loaded *jumpKey
	// busy is closed when the load under way ends; nil when none runs.
	busy chan struct{}
}

func newJumpLoad(esp slot.Dir, logf func(string, ...any)) *jumpLoad {
	return &jumpLoad{load: power.LoadKexec, esp: esp, logf: logf}
}

// writing notes that a slot's files are about to change: whatever was
// loaded no longer stands for them.
func (l *jumpLoad) writing(string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.loaded = nil
}

// acquire waits for the load under way, if any, and takes the turn: it
// returns the gen the new load runs under and the channel to close.
func (l *jumpLoad) acquire() (uint64, chan struct{}, *jumpKey) {
	l.mu.Lock()
	for l.busy != nil {
		busy := l.busy
		l.mu.Unlock()
		<-busy
		l.mu.Lock()
	}
	l.busy = make(chan struct{})
	defer l.mu.Unlock()
	return l.gen, l.busy, l.loaded
}

func (l *jumpLoad) release(gen uint64, done chan struct{}, k *jumpKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k != nil && gen == l.gen {
		l.loaded = k
	} else if k == nil {
		l.loaded = nil
	}
	close(done)
	l.busy = nil
}

// ensure makes the kernel hold k: it loads, unless k is loaded already
// and no slot write began since. It returns whether it loaded, and how
// long that took.
func (l *jumpLoad) ensure(k jumpKey) (loaded bool, took time.Duration, err error) {
	gen, done, have := l.acquire()
	// A key without digests (no record) matches nothing.
	if have != nil && *have == k && k.kernel != "" && k.initrd != "" {
		l.release(gen, done, have)
		return false, 0, nil
	}
	began := time.Now()
	root := string(l.esp)
	err = l.load(filepath.Join(root, slot.KernelFile(k.slot)), filepath.Join(root, slot.InitrdFile(k.slot)), k.cmdline)
	took = time.Since(began)
	if err != nil {
		// A failed load may have replaced the one held.
		l.release(gen, done, nil)
		return true, took, err
	}
	l.release(gen, done, &k)
	return true, took, nil
}

// preload loads what a staging just wrote into slotName. The staging
// calls it before it reports the slot held or staged, so a held slot is
// ready to jump into and no load runs beside a node's turn; a failure
// is logged and leaves the load to the reboot, as before.
func (l *jumpLoad) preload(slotName, cmdline string, rec slot.Image) {
	loaded, took, err := l.ensure(keyOf(slotName, cmdline, rec))
	switch {
	case err != nil:
		l.logf("upgrade: slot %s's kernel not loaded ahead for its kexec (%v); the reboot loads it", slotName, err)
	case loaded:
		l.logf("upgrade: slot %s's kernel and initrd loaded ahead for its kexec in %s", slotName, took.Round(time.Millisecond))
	}
}
