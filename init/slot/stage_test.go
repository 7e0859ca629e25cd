package slot

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backends are the ESPs the state machine is tested on: a directory (the
// mounted ESP, Dir) and a FAT32 image through go-diskfs.
var backends = []struct {
	name string
	new  func(t testing.TB) FS
}{
	{"dir", func(t testing.TB) FS {
		fsys := Dir(t.TempDir())
		populate(t, fsys, builderESP())
		return fsys
	}},
	{"fat", newFATESP},
}

// update returns the Update of a stage with the given content.
func update(kernel, initrd []byte, options string) Update {
	return Update{Kernel: bytes.NewReader(kernel), Initrd: bytes.NewReader(initrd), Options: options}
}

// tryBoot does what systemd-boot does to a counted entry before it boots
// it: one try left less, one done more.
func tryBoot(t *testing.T, fsys FS, slot string) {
	t.Helper()
	st, err := Read(fsys)
	require.NoError(t, err)
	e := st.Slots[slot].Entry
	require.NotNil(t, e, "slot %s has an entry", slot)
	require.True(t, e.Name.Counted && e.Name.Left > 0, "slot %s can be tried: %s", slot, e.File)
	n := e.Name
	n.Left, n.Done = n.Left-1, n.Done+1
	require.NoError(t, fsys.Rename(e.Path(), entriesDir+"/"+n.String()))
}

// entryFiles lists loader/entries.
func entryFiles(t *testing.T, fsys FS) []string {
	t.Helper()
	des, err := fsys.ReadDir(entriesDir)
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// noOps runs fn on fsys and asserts it changes nothing on the disk.
func noOps(t *testing.T, fsys FS, what string, fn func(FS) error) {
	t.Helper()
	c := &crashFS{FS: fsys, budget: -1}
	require.NoError(t, fn(c), what)
	assert.Empty(t, c.log, "%s again changes nothing", what)
}

// stateMachine runs a node's life on fsys, a fresh builder ESP: upgrade
// to b, bless it, upgrade to a, roll a back, upgrade to a again and bless
// it on its last try.
func stateMachine(t *testing.T, fsys FS, kernel, initrd []byte) {
	read := func() State {
		t.Helper()
		st, err := Read(fsys)
		require.NoError(t, err)
		return st
	}
	content := func(p string) []byte {
		t.Helper()
		b, err := fsys.ReadFile(p)
		require.NoError(t, err)
		return b
	}
	aKernel, aInitrd := content("etcdbox/a/vmlinuz"), content("etcdbox/a/initrd")
	cmdline := func(slot string) map[string]string { return map[string]string{"etcdbox.slot": slot} }

	st := read()
	booted, trying := Booted(cmdline("a"), st)
	assert.Equal(t, "a", booted)
	assert.False(t, trying, "the builder's slot a is blessed")
	assert.Equal(t, "b", Other(booted))

	// Upgrade into b, with a's command line.
	e, err := Stage(fsys, "b", update(kernel, initrd, st.Slots["a"].Entry.Options))
	require.NoError(t, err)
	wantOptions := "console=ttyS0,115200 panic=10 etcdbox.slot=b etcdbox.debug=1"
	assert.Equal(t, Entry{File: "etcdbox-b+3.conf", Name: Name{Slot: "b", Counted: true, Left: 3}, Generation: 2, Options: wantOptions}, e)
	assert.Equal(t, entryText("b", 2, wantOptions), string(content("loader/entries/etcdbox-b+3.conf")))
	assert.Equal(t, kernel, content("etcdbox/b/vmlinuz"))
	assert.Equal(t, initrd, content("etcdbox/b/initrd"))
	st = read()
	assert.Equal(t, Trying, st.Slots["b"].Status())
	assert.True(t, st.Slots["b"].Complete(), describe(st))
	assert.Equal(t, "b", st.Next(), "the staged slot boots next")
	assert.ElementsMatch(t, []string{"etcdbox-a.conf", "etcdbox-b+3.conf"}, entryFiles(t, fsys))

	// Boot b: systemd-boot counts a try; the gate blesses it.
	tryBoot(t, fsys, "b")
	st = read()
	booted, trying = Booted(cmdline("b"), st)
	assert.Equal(t, "b", booted)
	assert.True(t, trying, "b is on probation")
	require.NoError(t, Bless(fsys, "b"))
	noOps(t, fsys, "Bless", func(fsys FS) error { return Bless(fsys, "b") })
	st = read()
	assert.Equal(t, Blessed, st.Slots["b"].Status())
	_, trying = Booted(cmdline("b"), st)
	assert.False(t, trying)
	assert.Equal(t, "b", st.Next(), "blessed b (2) over blessed a (1)")
	assert.ElementsMatch(t, []string{"etcdbox-a.conf", "etcdbox-b.conf"}, entryFiles(t, fsys))

	// Upgrade into a, from b. b is blessed now: a may be staged; b may not.
	_, err = Stage(fsys, "a", update(initrd, kernel, st.Slots["b"].Entry.Options))
	require.NoError(t, err)
	st = read()
	assert.Equal(t, 3, st.Slots["a"].Entry.Generation)
	assert.Equal(t, "console=ttyS0,115200 panic=10 etcdbox.slot=a etcdbox.debug=1", st.Slots["a"].Entry.Options)
	assert.Equal(t, "a", st.Next(), "new a (3) over blessed b (2)")
	_, err = Stage(fsys, "b", update(kernel, initrd, wantOptions))
	assert.ErrorIs(t, err, ErrNoFallback, "b cannot be staged while a is only trying")

	// a fails its gate: marked bad, b boots again.
	tryBoot(t, fsys, "a")
	require.NoError(t, MarkBad(fsys, "a"))
	noOps(t, fsys, "MarkBad", func(fsys FS) error { return MarkBad(fsys, "a") })
	st = read()
	assert.Equal(t, Bad, st.Slots["a"].Status())
	assert.Equal(t, "etcdbox-a+0-1.conf", st.Slots["a"].Entry.File)
	assert.Equal(t, "b", st.Next(), "bad a sorts after b")
	assert.Equal(t, kernel, content("etcdbox/b/vmlinuz"), "b is untouched")

	// A retried upgrade into a: same generation, three tries. It boots
	// three times; the third, last try passes the gate.
	_, err = Stage(fsys, "a", update(aKernel, aInitrd, wantOptions))
	require.NoError(t, err)
	st = read()
	assert.Equal(t, "etcdbox-a+3.conf", st.Slots["a"].Entry.File)
	assert.Equal(t, 3, st.Slots["a"].Entry.Generation)
	for range 3 {
		tryBoot(t, fsys, "a")
	}
	st = read()
	assert.Equal(t, "etcdbox-a+0-3.conf", st.Slots["a"].Entry.File)
	_, trying = Booted(cmdline("a"), st)
	assert.True(t, trying, "the last try is still on probation")
	require.NoError(t, Bless(fsys, "a"))
	st = read()
	assert.Equal(t, Blessed, st.Slots["a"].Status())
	assert.Equal(t, "a", st.Next())
	assert.Equal(t, aKernel, content("etcdbox/a/vmlinuz"))
	assert.Equal(t, aInitrd, content("etcdbox/a/initrd"))
	assert.ElementsMatch(t, []string{"etcdbox-a.conf", "etcdbox-b.conf"}, entryFiles(t, fsys))
	assert.Empty(t, st.Ignored, "no temporary files are left")
}

func TestStateMachine(t *testing.T) {
	fsys := backends[0].new(t)
	stateMachine(t, fsys, blob(10, 300_000), blob(11, 900_000))
}

func TestStageIsIdempotent(t *testing.T) {
	fsys := backends[0].new(t)
	k, i := blob(10, 1000), blob(11, 2000)
	first, err := Stage(fsys, "b", update(k, i, builderOptions))
	require.NoError(t, err)
	before := snapshot(t, fsys)
	again, err := Stage(fsys, "b", update(k, i, builderOptions))
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, before, snapshot(t, fsys))
}

func TestStageRefuses(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(t *testing.T, fsys FS)
		slot   string
		update Update
		is     error
		err    string
	}{
		{name: "unknown slot", slot: "c", err: "stage slot c: unknown slot"},
		{name: "no panic", slot: "b", update: update([]byte("k"), []byte("i"), "console=ttyS0"), err: "want a non-zero panic="},
		{name: "panic=0", slot: "b", update: update([]byte("k"), []byte("i"), "panic=0"), err: "want a non-zero panic="},
		{name: "newline", slot: "b", update: update([]byte("k"), []byte("i"), "panic=10\nlinux /x"), err: "must be one line"},
		{name: "tries", slot: "b", update: Update{Kernel: strings.NewReader("k"), Initrd: strings.NewReader("i"), Options: "panic=10", Tries: -1}, err: "tries -1"},
		{name: "no kernel", slot: "b", update: Update{Initrd: strings.NewReader("i"), Options: "panic=10"}, err: "no kernel"},
		{name: "fallback trying", slot: "b", is: ErrNoFallback, err: "slot a is trying",
			edit: func(t *testing.T, fsys FS) {
				require.NoError(t, fsys.Rename("loader/entries/etcdbox-a.conf", "loader/entries/etcdbox-a+2-1.conf"))
			}},
		{name: "fallback bad", slot: "b", is: ErrNoFallback, err: "slot a is bad",
			edit: func(t *testing.T, fsys FS) {
				require.NoError(t, MarkBad(fsys, "a"))
			}},
		{name: "fallback absent", slot: "a", is: ErrNoFallback, err: "slot b is absent"},
		{name: "fallback without initrd", slot: "b", is: ErrNoFallback, err: "etcdbox/a/initrd is missing",
			edit: func(t *testing.T, fsys FS) {
				require.NoError(t, fsys.Remove("etcdbox/a/initrd"))
			}},
		{name: "fallback malformed", slot: "b", is: ErrNoFallback, err: `entry loader/entries/etcdbox-a.conf: version "x"`,
			edit: func(t *testing.T, fsys FS) {
				require.NoError(t, fsys.WriteFile("loader/entries/etcdbox-a.conf", strings.NewReader(strings.Replace(builderEntry, "version 1", "version x", 1))))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := backends[0].new(t)
			if tt.edit != nil {
				tt.edit(t, fsys)
			}
			if tt.update.Kernel == nil && tt.update.Options == "" {
				tt.update = update([]byte("k"), []byte("i"), builderOptions)
			}
			before := snapshot(t, fsys)
			_, err := Stage(fsys, tt.slot, tt.update)
			require.Error(t, err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			assert.Contains(t, err.Error(), tt.err)
			assert.Equal(t, before, snapshot(t, fsys), "a refused Stage changes nothing")
		})
	}
}

func TestBlessMarkBadNoEntry(t *testing.T) {
	fsys := backends[0].new(t)
	err := Bless(fsys, "b")
	assert.ErrorIs(t, err, ErrNoEntry)
	assert.EqualError(t, err, "bless slot b: slot has no entry")
	assert.ErrorIs(t, MarkBad(fsys, "b"), ErrNoEntry)
	assert.ErrorContains(t, Bless(fsys, "x"), "unknown slot")
}

func TestMarkBadRemovesBlessedLeftover(t *testing.T) {
	fsys := backends[0].new(t)
	// A rename cut short left a blessed and a trying name for b.
	for _, f := range []string{"etcdbox-b.conf", "etcdbox-b+2-1.conf"} {
		require.NoError(t, fsys.WriteFile("loader/entries/"+f, strings.NewReader(entryText("b", 2, "panic=10"))))
	}
	require.NoError(t, MarkBad(fsys, "b"))
	assert.ElementsMatch(t, []string{"etcdbox-a.conf", "etcdbox-b+0-0.conf"}, entryFiles(t, fsys),
		"the blessed name is the preferred one; it is renamed bad and the other removed")
	st, err := Read(fsys)
	require.NoError(t, err)
	assert.Equal(t, "a", st.Next())
}

func TestErrorsNameFileAndOperation(t *testing.T) {
	fsys := backends[0].new(t)
	tests := []struct {
		op   string
		want string
	}{
		{"write etcdbox/b/vmlinuz.tmp", "stage slot b: write etcdbox/b/vmlinuz.tmp: open /boot/efi/etcdbox/b/vmlinuz.tmp: no space left on device"},
		{"remove etcdbox/b/initrd", "stage slot b: remove etcdbox/b/initrd: remove /boot/efi/etcdbox/b/initrd: no space left on device"},
	}
	for _, tt := range tests {
		_, err := Stage(fsys, "b", update([]byte("k"), []byte("i"), builderOptions))
		require.NoError(t, err)
		_, err = Stage(failFS{FS: fsys, op: tt.op, err: syscall.ENOSPC}, "b", update([]byte("k"), []byte("i"), builderOptions))
		assert.EqualError(t, err, tt.want)
		assert.ErrorIs(t, err, syscall.ENOSPC)
	}
	// Dir's own errors carry the host path.
	_, err := Dir(t.TempDir()).ReadFile("loader/entries/etcdbox-a.conf")
	assert.ErrorContains(t, err, "open /")
	assert.ErrorContains(t, err, "loader/entries/etcdbox-a.conf")
}

// A scenario is an ESP state a Stage of b starts from.
type scenario struct {
	name string
	// edit turns a fresh builder ESP into the scenario.
	edit func(t testing.TB, fsys FS)
	// gen is the generation the staged entry gets.
	gen int
}

var scenarios = []scenario{
	{name: "fresh image", gen: 2},
	{name: "after a rollback", gen: 2, edit: func(t testing.TB, fsys FS) {
		// b was staged before, failed three tries and is bad.
		populate(t, fsys, files{
			"etcdbox/b/vmlinuz":                 blob(20, 50_000),
			"etcdbox/b/initrd":                  blob(21, 80_000),
			"loader/entries/etcdbox-b+0-3.conf": []byte(entryText("b", 2, "panic=10 etcdbox.slot=b")),
		})
	}},
	{name: "after a cut-short stage", gen: 2, edit: func(t testing.TB, fsys FS) {
		populate(t, fsys, files{
			"etcdbox/b/vmlinuz":                   blob(20, 50_000),
			"etcdbox/b/initrd.tmp":                blob(21, 1000),
			"loader/entries/etcdbox-b+3.conf.tmp": []byte("title etcdbox (sl"),
		})
	}},
	{name: "over an older blessed b", gen: 8, edit: func(t testing.TB, fsys FS) {
		// a is generation 7 and booted; b is the blessed generation 6.
		populate(t, fsys, files{
			"etcdbox/b/vmlinuz":               blob(20, 50_000),
			"etcdbox/b/initrd":                blob(21, 80_000),
			"loader/entries/etcdbox-b.conf":   []byte(entryText("b", 6, "panic=10 etcdbox.slot=b")),
			"loader/entries/etcdbox-a.conf":   []byte(strings.Replace(builderEntry, "version 1", "version 7", 1)),
			"loader/entries/etcdbox-x.conf":   []byte("foreign, stays\n"),
			"loader/entries/etcdbox-b+x.conf": []byte("malformed, in b's namespace\n"),
		})
	}},
}

// newKernel and newInitrd are what the crash tests stage.
var newKernel, newInitrd = blob(30, 123_457), blob(31, 234_567)

// checkCut checks the ESP after a power cut during a Stage of b: slot a
// (before holds its files) is untouched, and the slot systemd-boot boots
// next, and every other entry that is not bad, points at complete files.
func checkCut(t *testing.T, fsys FS, before files, sc scenario) {
	t.Helper()
	st, err := Read(fsys)
	require.NoError(t, err)
	after := snapshot(t, fsys)
	for p, b := range before {
		if strings.Contains(p, "etcdbox-a") || strings.HasPrefix(p, "etcdbox/a/") {
			assert.True(t, bytes.Equal(b, after[p]), "%s is untouched", p)
		}
	}
	// Boot files under their own names are only ever complete, old or
	// new: Read's Kernel and Initrd mean that.
	for p, want := range map[string][]byte{kernelPath("b"): newKernel, initrdPath("b"): newInitrd} {
		if got, ok := after[p]; ok && !bytes.Equal(got, before[p]) {
			assert.True(t, bytes.Equal(got, want), "%s is old or new, never partial (%d bytes)", p, len(got))
		}
	}
	next := st.Next()
	require.NotEmpty(t, next, describe(st))
	for _, slot := range names {
		s := st.Slots[slot]
		if s.Entry == nil || s.Status() == Bad && slot != next {
			continue
		}
		require.True(t, s.Complete(), "slot %s can boot: %s", slot, describe(st))
		k, i := after[kernelPath(slot)], after[initrdPath(slot)]
		switch {
		case slot == "a":
			assert.Equal(t, before[kernelPath(slot)], k)
			assert.Equal(t, before[initrdPath(slot)], i)
		case s.Entry.Generation == sc.gen && s.Status() == Trying:
			assert.Equal(t, newKernel, k, "new b's kernel is complete")
			assert.Equal(t, newInitrd, i, "new b's initrd is complete")
		default:
			assert.Equal(t, before[kernelPath(slot)], k, "old b's kernel is intact")
			assert.Equal(t, before[initrdPath(slot)], i, "old b's initrd is intact")
		}
	}
	if next == "b" {
		assert.Equal(t, sc.gen, st.Slots["b"].Entry.Generation, "only the new b can outrank a")
	}
}

// checkStaged checks the ESP after a Stage of b completed.
func checkStaged(t *testing.T, fsys FS, before files, sc scenario) {
	t.Helper()
	st, err := Read(fsys)
	require.NoError(t, err)
	b := st.Slots["b"]
	require.NotNil(t, b.Entry)
	assert.Equal(t, "etcdbox-b+3.conf", b.Entry.File)
	assert.Equal(t, sc.gen, b.Entry.Generation)
	assert.Nil(t, b.Extra)
	assert.True(t, b.Complete(), describe(st))
	assert.Equal(t, "b", st.Next())
	after := snapshot(t, fsys)
	assert.Equal(t, newKernel, after["etcdbox/b/vmlinuz"])
	assert.Equal(t, newInitrd, after["etcdbox/b/initrd"])
	var bfiles []string
	for p := range after {
		if strings.HasPrefix(p, "etcdbox/b/") || inSlot(path.Base(p), "b") {
			bfiles = append(bfiles, p)
		}
	}
	assert.ElementsMatch(t, []string{"etcdbox/b/vmlinuz", "etcdbox/b/initrd", "loader/entries/etcdbox-b+3.conf"}, bfiles)
	for p, data := range before {
		if !strings.HasPrefix(p, "etcdbox/b/") && !inSlot(path.Base(p), "b") {
			assert.True(t, bytes.Equal(data, after[p]), "%s is untouched", p)
		}
	}
}

// TestStagePowerCut cuts the power before each disk operation of a Stage
// in turn, checks that the old slot still boots, then runs Stage again.
func TestStagePowerCut(t *testing.T) {
	for _, be := range backends {
		for _, sc := range scenarios {
			t.Run(be.name+"/"+sc.name, func(t *testing.T) {
				if be.name == "fat" && testing.Short() && sc.name != scenarios[1].name {
					t.Skip("one FAT scenario with -short")
				}
				setup := func() (FS, files) {
					fsys := be.new(t)
					if sc.edit != nil {
						sc.edit(t, fsys)
					}
					return fsys, snapshot(t, fsys)
				}
				// Count the operations of an uninterrupted Stage.
				fsys, before := setup()
				c := &crashFS{FS: fsys, budget: -1}
				_, err := Stage(c, "b", update(newKernel, newInitrd, builderOptions))
				require.NoError(t, err)
				checkStaged(t, fsys, before, sc)
				ops := c.log
				t.Logf("%d operations: %s", len(ops), strings.Join(ops, "; "))
				assert.Equal(t, "rename loader/entries/etcdbox-b+3.conf.tmp etcdbox-b+3.conf", ops[len(ops)-1], "the entry comes last")

				for k := range ops {
					t.Run(fmt.Sprintf("cut before %d %s", k, ops[k]), func(t *testing.T) {
						fsys, before := setup()
						_, err := Stage(&crashFS{FS: fsys, budget: k}, "b", update(newKernel, newInitrd, builderOptions))
						require.ErrorIs(t, err, errPowerCut)
						checkCut(t, fsys, before, sc)
						_, err = Stage(fsys, "b", update(newKernel, newInitrd, builderOptions))
						require.NoError(t, err, "Stage after the cut")
						checkStaged(t, fsys, before, sc)
					})
				}
			})
		}
	}
}

// TestStageRepeatedPowerCuts cuts the power again and again, each retry
// getting one operation further, until a Stage completes.
func TestStageRepeatedPowerCuts(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			fsys := backends[0].new(t)
			if sc.edit != nil {
				sc.edit(t, fsys)
			}
			before := snapshot(t, fsys)
			for budget := 0; ; budget++ {
				require.Less(t, budget, 100, "Stage never completes")
				_, err := Stage(&crashFS{FS: fsys, budget: budget}, "b", update(newKernel, newInitrd, builderOptions))
				if err == nil {
					break
				}
				require.True(t, errors.Is(err, errPowerCut), "%v", err)
				checkCut(t, fsys, before, sc)
			}
			checkStaged(t, fsys, before, sc)
		})
	}
}
