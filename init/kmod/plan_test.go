package kmod

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A module that waits for its devices (ahci and its SATA links) does not
// hold back one that needs nothing of it: slow can go in only once quick
// has, which a sequential load of this order never allows.
func TestLoadInParallel(t *testing.T) {
	dir := writeIndex(t, map[string]string{
		"modules.dep":   "kernel/slow.ko:\nkernel/quick.ko:\nkernel/after.ko: kernel/slow.ko\n",
		"modules.alias": "alias test:slow* slow\nalias test:quick* quick\nalias test:after* after\n",
	})
	sys := fakeSysfs(t.TempDir())
	sys.device(t, "1", "test:slow")
	sys.device(t, "2", "test:after")
	sys.device(t, "3", "test:quick")
	quickIn := make(chan struct{})
	rec := &recorder{hook: map[string]func(){
		"quick": func() { close(quickIn) },
	}}
	rec.fail = map[string]error{}
	insert := func(path, params string) error {
		if NameOf(path) == "slow" {
			select {
			case <-quickIn:
			case <-time.After(10 * time.Second):
				return errors.New("quick never went in while slow was going in")
			}
		}
		return rec.insert(path, params)
	}
	l := &Loader{Dir: dir, Insert: insert, Parallel: 2}
	loaded, err := l.Coldplug(string(sys))
	require.NoError(t, err)
	assert.Equal(t, []string{"slow", "after", "quick"}, loaded, "the order of a sequential load")
	assert.Equal(t, []string{"quick", "slow", "after"}, rec.inserted)
}

// Network drivers go in one after another, in plan order, so that the
// kernel names the NICs alike at every boot; the others do not wait.
func TestNetDriversInPlanOrder(t *testing.T) {
	dir := writeIndex(t, map[string]string{
		"modules.dep": "kernel/drivers/net/nic1.ko:\nkernel/drivers/block/disk.ko:\nkernel/drivers/net/nic2.ko:\n",
	})
	ix, err := ReadIndex(dir)
	require.NoError(t, err)
	p := newPlan(ix)
	for _, n := range []string{"nic1", "disk", "nic2"} {
		require.NoError(t, p.add(n, ix.Path(n), true))
	}
	assert.Empty(t, p.item("nic1").after)
	assert.Empty(t, p.item("disk").after)
	assert.Equal(t, []edge{{item: 0, required: false}}, p.item("nic2").after)

	// Run: nic2 never goes in while nic1 is going in, even when nic1 is
	// slow to (it waits for disk, which does go in meanwhile).
	var mu sync.Mutex
	var in []string
	diskIn := make(chan struct{})
	p.run(func(path, _ string) error {
		n := NameOf(path)
		mu.Lock()
		in = append(in, n)
		mu.Unlock()
		switch n {
		case "disk":
			close(diskIn)
		case "nic1":
			<-diskIn
		}
		return nil
	}, nil, 2)
	assert.Less(t, strings.Index(strings.Join(in, " "), "nic1"), strings.Index(strings.Join(in, " "), "nic2"), "%q", in)
	for _, it := range p.items {
		assert.NoError(t, it.err)
	}
}

// No more than Parallel inserts are under way at once.
func TestParallelBound(t *testing.T) {
	var dep strings.Builder
	names := []string{"m0", "m1", "m2", "m3", "m4", "m5"}
	for _, n := range names {
		dep.WriteString("kernel/" + n + ".ko:\n")
	}
	dir := writeIndex(t, map[string]string{"modules.dep": dep.String()})
	var mu sync.Mutex
	var cur, most int
	l := &Loader{Dir: dir, Parallel: 2, Insert: func(string, string) error {
		mu.Lock()
		cur++
		most = max(most, cur)
		mu.Unlock()
		// Stay in until a second insert is in too (or a while has
		// passed), so that inserts overlap wherever the bound allows.
		deadline := time.Now().Add(500 * time.Millisecond)
		for {
			mu.Lock()
			n := cur
			mu.Unlock()
			if n >= 2 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		cur--
		mu.Unlock()
		return nil
	}}
	loaded, err := l.Coldplug(t.TempDir(), names...)
	require.NoError(t, err)
	assert.Equal(t, names, loaded)
	assert.Equal(t, 2, most)
}

// A module whose required dependency fails is not inserted, and the
// error says why; a soft dependency's failure is logged, not returned.
func TestPlanFailures(t *testing.T) {
	dir := writeIndex(t, map[string]string{
		"modules.dep":     "kernel/base.ko:\nkernel/top.ko: kernel/base.ko\nkernel/opt.ko:\nkernel/user.ko:\n",
		"modules.softdep": "softdep user pre: opt\n",
	})
	rec := &recorder{fail: map[string]error{"base": syscall.ENODEV, "opt": syscall.ENOENT}}
	var logs []string
	var mu sync.Mutex
	l := &Loader{Dir: dir, Insert: rec.insert, Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, f)
	}}
	loaded, err := l.Coldplug(t.TempDir(), "top", "user", "nosuch")
	assert.Equal(t, []string{"user"}, loaded)
	assert.Equal(t, []string{"user"}, rec.inserted, "top is never tried")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load module top: module top: dependency: insert "+dir+"/kernel/base.ko: no such device")
	assert.Contains(t, err.Error(), "load module nosuch: no such module or alias")
	assert.NotContains(t, err.Error(), "opt")
	assert.Len(t, logs, 1, "the soft dependency's failure: %q", logs)
	assert.False(t, l.Loaded("top"))
	assert.True(t, l.Loaded("user"))

	// A later call tries a failed module again.
	delete(rec.fail, "base")
	more, err := l.Load("top")
	require.NoError(t, err)
	assert.Equal(t, []string{"base", "top"}, more)
}

func TestSlowest(t *testing.T) {
	l := &Loader{took: map[string]time.Duration{"a": time.Millisecond, "ahci": 362 * time.Millisecond, "ext4": 142 * time.Millisecond, "b": time.Millisecond}}
	assert.Equal(t, []Timing{{"ahci", 362 * time.Millisecond}, {"ext4", 142 * time.Millisecond}, {"a", time.Millisecond}}, l.Slowest(3))
	assert.Len(t, l.Slowest(10), 4)
	assert.Empty(t, (&Loader{}).Slowest(2))
}
