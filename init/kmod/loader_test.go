package kmod

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder is an Insert seam that records module names and can fail or
// run a hook per module. The Loader calls it from several goroutines.
type recorder struct {
	mu       sync.Mutex
	inserted []string
	fail     map[string]error
	hook     map[string]func()
}

func (r *recorder) insert(path, params string) error {
	n := NameOf(path)
	if h := r.hook[n]; h != nil {
		h()
	}
	if err := r.fail[n]; err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inserted = append(r.inserted, n)
	return nil
}

// assertOrdered checks that every module in inserted came after the
// modules it needs (modules.dep) and its soft pre-dependencies, when
// those were inserted too.
func assertOrdered(t *testing.T, ix *Index, inserted []string) {
	t.Helper()
	pos := map[string]int{}
	for i, n := range inserted {
		pos[n] = i
	}
	for i, n := range inserted {
		before := append([]string(nil), ix.modules[n].deps...)
		for _, s := range ix.softdeps[n].pre {
			before = append(before, ix.Resolve(s)...)
		}
		for _, d := range before {
			if j, ok := pos[d]; ok {
				assert.Less(t, j, i, "%s went in before %s, which it needs", n, d)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	ix, _ := realIndex(t)
	for _, tt := range []struct {
		name     string
		load     []string
		fail     map[string]error
		want     []string // inserted, in the order of a sequential load
		returned []string // what Load returns, when not want
		wantErr  string
		wantLogs int
	}{
		{
			name: "ext4 with deps, each once",
			load: []string{"ext4", "ext4", "jbd2"},
			want: []string{"crc32c_intel", "crc32c_generic", "jbd2", "mbcache", "crc16", "ext4"},
		},
		{
			name: "shared deps once",
			load: []string{"virtio_blk", "virtio_net"},
			want: []string{"virtio_ring", "virtio", "virtio_blk", "failover", "net_failover", "virtio_net"},
		},
		{
			name: "builtin is a no-op",
			load: []string{"amd-uncore"},
		},
		{
			name:     "already loaded (EEXIST) counts as loaded",
			load:     []string{"crc16"},
			fail:     map[string]error{"crc16": fmt.Errorf("finit_module: %w", syscall.EEXIST)},
			returned: []string{"crc16"},
		},
		{
			// TCG's default CPU has no SSE4.2: crc32c-intel says ENODEV.
			name:     "failing soft dependency is only logged",
			load:     []string{"ext4"},
			fail:     map[string]error{"crc32c_intel": syscall.ENODEV},
			want:     []string{"crc32c_generic", "jbd2", "mbcache", "crc16", "ext4"},
			wantLogs: 1,
		},
		{
			// crc16 needs nothing of mbcache: it still goes in.
			name:    "failing hard dependency stops the module",
			load:    []string{"ext4"},
			fail:    map[string]error{"mbcache": syscall.ENOMEM},
			want:    []string{"crc32c_intel", "crc32c_generic", "jbd2", "crc16"},
			wantErr: "module ext4: dependency: insert",
		},
		{
			name:    "unknown name",
			load:    []string{"nope"},
			wantErr: "load module nope: no such module or alias",
		},
		{
			name: "by alias",
			load: []string{"fs-vfat"},
			want: []string{"fat", "vfat"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{fail: tt.fail}
			var logs []string
			l := &Loader{Index: ix, Insert: rec.insert, Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }}
			var errs, got []string
			for _, n := range tt.load {
				done, err := l.Load(n)
				got = append(got, done...)
				if err != nil {
					errs = append(errs, err.Error())
				}
			}
			returned := tt.want
			if tt.returned != nil {
				returned = tt.returned
			}
			assert.Equal(t, returned, got, "returned, in the order of a sequential load")
			assert.ElementsMatch(t, tt.want, rec.inserted, "inserted")
			assertOrdered(t, ix, rec.inserted)
			if tt.wantErr == "" {
				assert.Empty(t, errs)
			} else {
				require.Len(t, errs, 1)
				assert.Contains(t, errs[0], tt.wantErr)
			}
			assert.Len(t, logs, tt.wantLogs, "logs: %q", logs)
		})
	}
}

func TestLoadParams(t *testing.T) {
	ix, _ := realIndex(t)
	var got []string
	l := &Loader{Index: ix, Params: map[string]string{"virtio_blk": "queue_depth=64"},
		Insert: func(path, params string) error { got = append(got, NameOf(path)+"("+params+")"); return nil }}
	_, err := l.Load("virtio-blk")
	require.NoError(t, err)
	assert.Equal(t, []string{"virtio_ring()", "virtio()", "virtio_blk(queue_depth=64)"}, got)
	assert.True(t, l.Loaded("virtio-blk"))
}

// fakeSysfs is a /sys with devices under sys/devices, each linked from
// sys/bus/<bus>/devices (the bus is the modalias' prefix) as sysfs does.
type fakeSysfs string

func (s fakeSysfs) device(t *testing.T, rel, modalias string) {
	t.Helper()
	bus, _, _ := strings.Cut(modalias, ":")
	s.add(t, filepath.Join("bus", cmp.Or(bus, "platform"), "devices"), rel, modalias)
}

// classDevice adds a class device (no bus), linked from sys/class/class.
func (s fakeSysfs) classDevice(t *testing.T, class, rel, modalias string) {
	t.Helper()
	s.add(t, filepath.Join("class", class), rel, modalias)
}

func (s fakeSysfs) add(t *testing.T, list, rel, modalias string) {
	t.Helper()
	dir := filepath.Join(string(s), "devices", rel)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	uevent := "DRIVER=x\nMODALIAS=" + modalias + "\nPCI_SLOT_NAME=0000:00:02.0\n"
	if modalias == "" {
		uevent = "DRIVER=x\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "uevent"), []byte(uevent), 0o444))
	links := filepath.Join(string(s), list)
	require.NoError(t, os.MkdirAll(links, 0o755))
	target, err := filepath.Rel(links, dir)
	require.NoError(t, err)
	require.NoError(t, os.Symlink(target, filepath.Join(links, filepath.Base(rel))))
}

func TestColdplug(t *testing.T) {
	ix, _ := realIndex(t)
	sys := fakeSysfs(t.TempDir())
	// A QEMU q35 machine, cut down: virtio-blk and virtio-net on PCI, the
	// i6300esb watchdog, the ACPI power button, and devices nothing binds.
	sys.device(t, "pci0000:00/0000:00:02.0", "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00")
	sys.device(t, "pci0000:00/0000:00:03.0", "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00")
	sys.device(t, "pci0000:00/0000:00:04.0", "pci:v00008086d000025ABsv00001AF4sd00001100bc08sc80i00")
	sys.device(t, "LNXSYSTM:00/LNXPWRBN:00", "acpi:LNXPWRBN:")
	sys.device(t, "LNXSYSTM:00/PNP0C0C:00", "acpi:PNP0C0C:")
	sys.device(t, "pci0000:00/0000:00:1f.0", "pci:v0000FFFFd0000FFFFsv00000000sd00000000bc12sc34i56")
	sys.device(t, "platform/empty", "")
	// A CPU with SSE4.2 (0094), on the cpu bus: its MODALIAS is in its
	// uevent only.
	sys.device(t, "system/cpu/cpu0", "cpu:type:x86,ven0000fam0006mod0001:feature:,0000,0001,0094")
	// The power button's input device is a class device, on no bus.
	sys.classDevice(t, "input", "LNXSYSTM:00/LNXPWRBN:00/input/input0", "input:b0019v0000p0001e0000-e0,1,k74,ramlsfw")
	// A symlink loop like sysfs' subsystem links must not be followed.
	require.NoError(t, os.Symlink("..", filepath.Join(string(sys), "devices", "pci0000:00", "subsystem")))
	// An unreadable uevent (a directory of that name) is skipped, and so
	// is a device without one.
	require.NoError(t, os.MkdirAll(filepath.Join(string(sys), "devices", "weird", "uevent"), 0o755))
	require.NoError(t, os.Symlink("../../../devices/weird", filepath.Join(string(sys), "bus", "platform", "devices", "weird")))
	require.NoError(t, os.MkdirAll(filepath.Join(string(sys), "devices", "virtual", "tty", "tty0"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(string(sys), "class", "tty"), 0o755))
	require.NoError(t, os.Symlink("../../devices/virtual/tty/tty0", filepath.Join(string(sys), "class", "tty", "tty0")))
	// A device no list links to is not one sysfs knows: not loaded for.
	const nvme = "pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02" // QEMU's NVMe
	require.Contains(t, ix.Match(nvme), "nvme")
	require.NoError(t, os.MkdirAll(filepath.Join(string(sys), "devices", "stray"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(string(sys), "devices", "stray", "uevent"), []byte("MODALIAS="+nvme+"\n"), 0o444))
	// Nor is one of a class whose devices have no modalias (misc): the
	// scan does not read them.
	sys.classDevice(t, "misc", "virtual/misc/odd", nvme)

	// Loading virtio_pci makes the virtio devices appear, as the kernel
	// does when the driver probes the PCI functions.
	rec := &recorder{hook: map[string]func(){
		"virtio_pci": func() {
			sys.device(t, "pci0000:00/0000:00:02.0/virtio0", "virtio:d00000002v00001AF4")
			sys.device(t, "pci0000:00/0000:00:03.0/virtio1", "virtio:d00000001v00001AF4")
		},
	}}
	l := &Loader{Index: ix, Insert: rec.insert}
	loaded, err := l.Coldplug(string(sys))
	require.NoError(t, err)
	assert.ElementsMatch(t, rec.inserted, loaded)
	assertOrdered(t, ix, rec.inserted)
	assert.Equal(t, []string{
		// round 1, devices sorted by path
		"button", "evdev",
		"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
		"watchdog", "i6300esb",
		"crc32c_intel",
		// round 2: the virtio devices
		"virtio_blk",
		"failover", "net_failover", "virtio_net",
	}, loaded)

	// Nothing new: a second coldplug inserts nothing.
	again, err := l.Coldplug(string(sys))
	require.NoError(t, err)
	assert.Empty(t, again)
}

// TestLoadPresent loads only the watchdog's driver of a q35 machine's
// devices, with the core's parameters, before the rest; the coldplug
// after it does not insert it again. A driver that fails is named.
func TestLoadPresent(t *testing.T) {
	ix, _ := realIndex(t)
	sys := fakeSysfs(t.TempDir())
	sys.device(t, "pci0000:00/0000:00:02.0", "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00") // virtio-blk
	sys.device(t, "pci0000:00/0000:00:04.0", "pci:v00008086d000025ABsv00001AF4sd00001100bc08sc80i00") // i6300esb
	sys.device(t, "LNXSYSTM:00/LNXPWRBN:00", "acpi:LNXPWRBN:")
	watchdogs := func(name, path string) bool { return strings.Contains(path, "/drivers/watchdog/") }

	var mu sync.Mutex // the coldplug below inserts from several goroutines
	var params []string
	rec := &recorder{}
	l := &Loader{Index: ix, Params: map[string]string{"watchdog": "stop_on_reboot=0"},
		Insert: func(path, p string) error {
			mu.Lock()
			params = append(params, NameOf(path)+"("+p+")")
			mu.Unlock()
			return rec.insert(path, p)
		}}
	loaded, err := l.LoadPresent(string(sys), watchdogs)
	require.NoError(t, err)
	assert.Equal(t, []string{"watchdog", "i6300esb"}, loaded)
	assert.Equal(t, []string{"watchdog(stop_on_reboot=0)", "i6300esb()"}, params)

	rest, err := l.Coldplug(string(sys))
	require.NoError(t, err)
	assert.NotContains(t, rest, "i6300esb")
	assert.NotContains(t, rest, "watchdog")
	assert.Contains(t, rest, "virtio_pci")
	assert.Equal(t, []string{"watchdog", "i6300esb"}, rec.inserted[:2], "the watchdog's driver went in first")

	// A machine without a watchdog loads nothing, and says nothing.
	none := fakeSysfs(t.TempDir())
	none.device(t, "pci0000:00/0000:00:02.0", "pci:v00001AF4d00001001sv00001AF4sd00000002bc01sc00i00")
	l = &Loader{Index: ix, Insert: (&recorder{}).insert}
	loaded, err = l.LoadPresent(string(none), watchdogs)
	require.NoError(t, err)
	assert.Empty(t, loaded)

	// A driver that fails to load is named.
	bad := &recorder{fail: map[string]error{"i6300esb": syscall.ENODEV}}
	l = &Loader{Index: ix, Insert: bad.insert}
	_, err = l.LoadPresent(string(sys), watchdogs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load module i6300esb: ")
	assert.Equal(t, []string{"watchdog"}, bad.inserted)
}

// writeIndex writes a small modules directory.
func writeIndex(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"modules.dep", "modules.alias", "modules.builtin"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(files[f]), 0o644))
	}
	if s, ok := files["modules.softdep"]; ok {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "modules.softdep"), []byte(s), 0o644))
	}
	return dir
}

func TestColdplugErrors(t *testing.T) {
	dir := writeIndex(t, map[string]string{
		"modules.dep": "kernel/a.ko: kernel/base.ko\nkernel/base.ko:\nkernel/b.ko:\nkernel/bad.ko:\n",
		"modules.alias": strings.Join([]string{
			"alias test:a* a",
			"alias test:gone* gone", // in modules.alias, not in modules.dep
			"alias test:b* b",
			"alias test:bad* bad",
			"alias test:builtin* bi",
		}, "\n"),
		"modules.builtin": "kernel/bi.ko\n",
	})
	sys := fakeSysfs(t.TempDir())
	sys.device(t, "1", "test:a1")
	sys.device(t, "2", "test:gone")
	sys.device(t, "3", "test:bad")
	sys.device(t, "4", "test:b")
	sys.device(t, "5", "test:builtin")
	sys.device(t, "6", "test:a2") // a again: inserted once

	rec := &recorder{fail: map[string]error{"bad": syscall.ENODEV}}
	l := &Loader{Dir: dir, Insert: rec.insert}
	loaded, err := l.Coldplug(string(sys))
	assert.Equal(t, []string{"base", "a", "b"}, loaded, "the others still load")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "module gone: not in")
	assert.Contains(t, err.Error(), "insert "+filepath.Join(dir, "kernel/bad.ko")+": no such device")
	assert.Contains(t, err.Error(), "(test:bad)", "the error names the device's modalias")
	assert.Equal(t, 2, strings.Count(err.Error(), "\n")+1, "two failures: %v", err)
}

func TestColdplugBounded(t *testing.T) {
	// A chain: loading mN makes a device appear that needs mN+1.
	var dep, alias strings.Builder
	for i := range 10 {
		fmt.Fprintf(&dep, "kernel/m%d.ko:\n", i)
		fmt.Fprintf(&alias, "alias test:%d m%d\n", i, i)
	}
	sys := fakeSysfs(t.TempDir())
	sys.device(t, "0", "test:0")
	hook := map[string]func(){}
	for i := range 9 {
		hook[fmt.Sprintf("m%d", i)] = func() { sys.device(t, fmt.Sprint(i+1), fmt.Sprintf("test:%d", i+1)) }
	}
	dir := writeIndex(t, map[string]string{"modules.dep": dep.String(), "modules.alias": alias.String()})

	for _, tt := range []struct {
		name    string
		rounds  int
		want    []string
		wantErr string
	}{
		{"bounded", 3, []string{"m0", "m1", "m2"}, "new devices still appearing after 3 rounds"},
		{"settles", 20, []string{"m3", "m4", "m5", "m6", "m7", "m8", "m9"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{hook: hook}
			l := &Loader{Dir: dir, MaxRounds: tt.rounds, Insert: rec.insert}
			if tt.name == "settles" { // continue where "bounded" stopped
				l.loaded = map[string]bool{"m0": true, "m1": true, "m2": true}
			}
			loaded, err := l.Coldplug(string(sys))
			assert.Equal(t, tt.want, loaded)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

func TestReadIndexErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		files   map[string]string
		wantErr string
	}{
		{"bad dep line", map[string]string{"modules.dep": "kernel/a.ko kernel/b.ko\n"}, "modules.dep:1: no ':'"},
		{"bad alias line", map[string]string{"modules.dep": "", "modules.alias": "# c\nalias onlytwo\n"}, "modules.alias:2: want"},
		{"bad softdep line", map[string]string{"modules.softdep": "softdep\n"}, "modules.softdep:1: want"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadIndex(writeIndex(t, tt.files))
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	_, err := ReadIndex(t.TempDir())
	assert.ErrorContains(t, err, "modules.dep")
}

func TestSoftdepSyntheticAndCycle(t *testing.T) {
	dir := writeIndex(t, map[string]string{
		"modules.dep":     "kernel/x.ko:\nkernel/y.ko:\nkernel/z.ko:\n",
		"modules.alias":   "alias crypto-y y\n",
		"modules.softdep": "softdep x pre: crypto-y missing post: z\nsoftdep z pre: x\nsoftdep y ignored-without-mode\n",
	})
	ix, err := ReadIndex(dir)
	require.NoError(t, err)
	got, err := ix.Order("x")
	require.NoError(t, err)
	assert.Equal(t, []string{"y", "x", "z"}, got)
}
