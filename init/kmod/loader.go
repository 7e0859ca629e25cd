package kmod

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultMaxRounds bounds Coldplug's rescans of sysfs.
const DefaultMaxRounds = 8

// Loader inserts modules from one modules directory, each at most once.
// The zero value with Dir set is ready to use; it is safe for concurrent
// use.
type Loader struct {
	// Dir is the modules directory; empty means /lib/modules/<uname -r>.
	Dir string
	// Index, when set, is used instead of reading Dir.
	Index *Index
	// Insert inserts one module file with its parameters. Nil means
	// InsertModule (finit_module(2)); an error wrapping EEXIST counts as
	// already loaded. Tests record calls here.
	Insert func(path, params string) error
	// Params holds module parameters by module name ("-" and "_" alike),
	// e.g. from name.param=value words on the kernel command line.
	Params map[string]string
	// Logf reports what is not an error of the caller's request: a soft
	// dependency that failed or is missing. Nil discards.
	Logf func(format string, args ...any)
	// MaxRounds bounds Coldplug's rescans; 0 means DefaultMaxRounds.
	MaxRounds int
	// Settle is how long Coldplug waits after a round that loaded
	// something before it rescans, for drivers that probe asynchronously
	// (SCSI scans). 0 rescans at once.
	Settle time.Duration
	// Parallel bounds the inserts under way at once; 0 means
	// DefaultParallel.
	Parallel int
	// Events, when set, opens a source of the kernel's device
	// announcements for each Coldplug, before its first scan of sysfs
	// (KernelEvents is the real one). Nil, or an error opening it, means
	// rescans of sysfs instead.
	Events func(sysDir string) (DeviceEvents, error)

	mu     sync.Mutex
	ix     *Index
	loaded map[string]bool
	took   map[string]time.Duration // each insert's time, for Slowest
	carry  *carried                 // LoadPresent's scan, for the next Coldplug
}

// carried is what LoadPresent leaves the next Coldplug, so that a boot
// scans sysfs once: the devices its scan found and the event source it
// opened before that scan, which has every device added since.
//
// Why: the first scan of a boot is the dearest (sysfs makes its nodes on
// first lookup): 380 ms for the watchdog step's scan on a q35 VM under
// software emulation, then 230 ms for the coldplug's scan of the same
// devices right after.
type carried struct {
	sysDir string
	ev     DeviceEvents
	devs   []Device
	seen   map[string]bool // "dir\x00modalias" of devs
}

// index returns the Index, reading it on first use. l.mu is held.
func (l *Loader) index() (*Index, error) {
	if l.ix != nil {
		return l.ix, nil
	}
	if l.Index != nil {
		l.ix = l.Index
		return l.ix, nil
	}
	dir := l.Dir
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	ix, err := ReadIndex(dir)
	if err != nil {
		return nil, fmt.Errorf("read module index %s: %w", dir, err)
	}
	l.ix = ix
	return ix, nil
}

func (l *Loader) logf(format string, args ...any) {
	if l.Logf != nil {
		l.Logf(format, args...)
	}
}

// Loaded reports whether this Loader inserted name (or found it already
// loaded).
func (l *Loader) Loaded(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded[Normalize(name)]
}

// Load loads a module given by name or alias, after its
// dependencies, and returns the modules it inserted, in order (each after
// what it needs). A builtin module, or one already loaded, is a no-op. An
// alias matching several modules loads them all and fails if any fails.
// Modules that do not need each other go in at once (DefaultParallel).
func (l *Loader) Load(name string) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ix, err := l.index()
	if err != nil {
		return nil, err
	}
	names := ix.Resolve(name)
	if len(names) == 0 {
		return nil, fmt.Errorf("load module %s: no such module or alias in %s", name, ix.dir)
	}
	var errs []error
	p := newPlan(ix)
	seen := map[string]error{}
	for _, n := range names {
		if err := ix.walk(n, seen, true, l.planner(p), l.softErr); err != nil {
			errs = append(errs, fmt.Errorf("load module %s: %w", name, err))
		}
	}
	done := l.run(p, names, seen)
	for _, n := range names {
		if it := p.item(n); it != nil && it.err != nil {
			errs = append(errs, fmt.Errorf("load module %s: %w", name, it.err))
		}
	}
	return done, errors.Join(errs...)
}

// LoadPresent loads the modules that match a device present under sysDir
// now and that pick accepts, by name and file path, each after what it
// needs, and returns those it inserted, in order. It scans sysfs once and
// loads in one round: it is for the few drivers wanted before all the
// others (the watchdog's, which the init arms before the other drivers
// probe); Coldplug later skips what it loaded. With Events, the next
// Coldplug on sysDir starts from this scan and the devices announced
// since, instead of scanning again (carried). A module that fails to
// load is an error; the others still load.
func (l *Loader) LoadPresent(sysDir string, pick func(name, path string) bool) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ix, err := l.index()
	if err != nil {
		return nil, err
	}
	var names []string
	var errs []error
	p := newPlan(ix)
	seen := map[string]error{}
	for _, d := range l.scanCarried(sysDir) {
		for _, n := range ix.Match(d.Modalias) {
			if _, tried := seen[n]; tried || !pick(n, ix.Path(n)) {
				continue
			}
			if err := ix.walk(n, seen, true, l.planner(p), l.softErr); err != nil {
				errs = append(errs, fmt.Errorf("device %s (%s): %w", d.Dir, d.Modalias, err))
				continue
			}
			names = append(names, n)
		}
	}
	done := l.run(p, names, seen)
	for _, n := range names {
		if it := p.item(n); it != nil && it.err != nil {
			errs = append(errs, fmt.Errorf("load module %s: %w", n, it.err))
		}
	}
	return done, errors.Join(errs...)
}

// planner returns the walk callback that plans one module's insert,
// unless this Loader has it in already. l.mu is held.
func (l *Loader) planner(p *plan) func(name, path string, hard bool) error {
	return func(name, path string, hard bool) error {
		if l.loaded[name] {
			return nil
		}
		return p.add(name, path, hard)
	}
}

// run inserts what p plans, and returns the modules it inserted in plan
// order. The targets are the modules the caller asked for: their
// failures are the caller's to report, the others' are reported through
// their dependants or, for soft dependencies, logged. seen (the walk
// state) learns each module's outcome. l.mu is held.
func (l *Loader) run(p *plan, targets []string, seen map[string]error) []string {
	insert := l.Insert
	if insert == nil {
		insert = InsertModule
	}
	for _, n := range targets {
		if it := p.item(n); it != nil {
			it.hard = true
		}
	}
	p.run(insert, l.Params, l.Parallel)
	if l.loaded == nil {
		l.loaded = map[string]bool{}
	}
	if l.took == nil {
		l.took = map[string]time.Duration{}
	}
	var done []string
	for _, it := range p.items {
		seen[it.name] = it.err
		if it.took > 0 {
			l.took[it.name] = it.took
		}
		switch {
		case it.err == nil:
			l.loaded[it.name] = true
			done = append(done, it.name)
		case !it.hard:
			l.softErr(it.name, it.err)
		}
	}
	return done
}

func (l *Loader) softErr(name string, err error) {
	l.logf("kmod: optional module %s: %v", name, err)
}

// Timing is how long one module's insert took.
type Timing struct {
	Module string
	Took   time.Duration
}

// Slowest returns the n modules whose insert took longest, slowest first.
func (l *Loader) Slowest(n int) []Timing {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Timing, 0, len(l.took))
	for m, d := range l.took {
		out = append(out, Timing{m, d})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Took != out[j].Took {
			return out[i].Took > out[j].Took
		}
		return out[i].Module < out[j].Module
	})
	return out[:min(n, len(out))]
}

// Coldplug loads the modules for the devices present: it reads the
// modalias of every device sysfs lists (see scanModaliases; sysDir is
// where sysfs is mounted, normally /sys), matches each against
// modules.alias, and loads all matching modules. Loading a bus driver
// makes new devices appear (virtio_pci creates the virtio devices that
// need virtio_blk): with Events set, Coldplug learns of them from the
// kernel's announcements, and otherwise (or when the source fails or
// lost some) by rescanning sysfs. It goes on until a round of loads
// brings no new device, at most MaxRounds rounds. After LoadPresent,
// with Events, its first round takes LoadPresent's scan instead of
// scanning again.
//
// also names modules to load in the first round with the devices'
// drivers, by name or alias: those no device announces (filesystems).
// Within a round, modules that do not need each other go in at once
// (DefaultParallel); a round ends when all its modules are in.
//
// It returns the modules it inserted, in order. A device no alias
// matches is not an error; a module that fails to load is, and all such
// failures are joined into the returned error while the others still
// load. Unreadable sysfs files are skipped.
func (l *Loader) Coldplug(sysDir string, also ...string) ([]string, error) {
	rounds := l.MaxRounds
	if rounds <= 0 {
		rounds = DefaultMaxRounds
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ix, err := l.index()
	if err != nil {
		return nil, err
	}
	ev, fresh, seenAlias := l.firstDevices(sysDir)
	if ev != nil {
		defer ev.Close()
	}
	seen := map[string]error{} // walk state across rounds: each module tried once
	var done []string
	var errs []error
	for round := 0; len(fresh) > 0 || round == 0 && len(also) > 0; round++ {
		if round == rounds {
			errs = append(errs, fmt.Errorf("coldplug: new devices still appearing after %d rounds", rounds))
			break
		}
		p := newPlan(ix)
		// The modules this round asks for, each with what to call it in
		// an error: the device, or the name given.
		type target struct{ module, what string }
		var targets []target
		ask := func(n, what string) {
			if _, tried := seen[n]; tried {
				return
			}
			if err := ix.walk(n, seen, true, l.planner(p), l.softErr); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
				return
			}
			targets = append(targets, target{n, what})
		}
		for _, a := range fresh {
			for _, n := range ix.Match(a.Modalias) {
				ask(n, fmt.Sprintf("device %s (%s)", a.Dir, a.Modalias))
			}
		}
		if round == 0 {
			for _, name := range also {
				names := ix.Resolve(name)
				if len(names) == 0 {
					errs = append(errs, fmt.Errorf("load module %s: no such module or alias in %s", name, ix.dir))
				}
				for _, n := range names {
					ask(n, "load module "+name)
				}
			}
		}
		mods := make([]string, len(targets))
		for i, t := range targets {
			mods[i] = t.module
		}
		inserted := l.run(p, mods, seen)
		done = append(done, inserted...)
		for _, t := range targets {
			if it := p.item(t.module); it != nil && it.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", t.what, it.err))
			}
		}
		if len(inserted) > 0 && l.Settle > 0 {
			l.mu.Unlock()
			time.Sleep(l.Settle)
			l.mu.Lock()
		}
		fresh = l.nextDevices(ev, sysDir, seenAlias)
	}
	return done, errors.Join(errs...)
}

// scanCarried scans sysDir for LoadPresent. With an event source, opened
// before the scan, it keeps both for the next Coldplug (carried), closing
// what an earlier LoadPresent kept. l.mu is held.
func (l *Loader) scanCarried(sysDir string) []Device {
	if l.carry != nil {
		l.carry.ev.Close()
		l.carry = nil
	}
	ev := l.openEvents(sysDir)
	seen := map[string]bool{}
	devs := scanModaliases(sysDir, seen)
	if ev != nil {
		l.carry = &carried{sysDir: sysDir, ev: ev, devs: devs, seen: seen}
	}
	return devs
}

// firstDevices returns Coldplug's event source (nil when there is none),
// the devices of its first round, and the set of devices seen. They are
// LoadPresent's scan and the devices announced since, when it left them
// for this sysDir; else a fresh scan, the source opened before it so
// that a device added in between is in both, and counted once. l.mu is
// held.
func (l *Loader) firstDevices(sysDir string) (DeviceEvents, []Device, map[string]bool) {
	if c := l.carry; c != nil {
		l.carry = nil
		if c.sysDir == sysDir {
			devs := append(c.devs, l.nextDevices(c.ev, sysDir, c.seen)...)
			sort.Slice(devs, func(i, j int) bool { return devs[i].Dir < devs[j].Dir })
			return c.ev, devs, c.seen
		}
		c.ev.Close()
	}
	ev := l.openEvents(sysDir)
	seen := map[string]bool{} // "dir\x00modalias"
	return ev, scanModaliases(sysDir, seen), seen
}

// openEvents opens the Events source, nil when there is none or it
// cannot open (then Coldplug rescans, as it would without one).
func (l *Loader) openEvents(sysDir string) DeviceEvents {
	if l.Events == nil {
		return nil
	}
	ev, err := l.Events(sysDir)
	if err != nil {
		l.logf("kmod: no device events (%v): rescanning sysfs after each round instead", err)
		return nil
	}
	return ev
}

// nextDevices returns the devices added since the last look, not yet
// seen: from ev when it has them all, else from a rescan of sysfs.
func (l *Loader) nextDevices(ev DeviceEvents, sysDir string, seen map[string]bool) []Device {
	if ev != nil {
		added, lost, err := ev.Added()
		if err == nil && !lost {
			var out []Device
			for _, d := range added {
				if key := d.Dir + "\x00" + d.Modalias; !seen[key] {
					seen[key] = true
					out = append(out, d)
				}
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
			return out
		}
		l.logf("kmod: device events incomplete (lost %t, %v): rescanning sysfs", lost, err)
	}
	return scanModaliases(sysDir, seen)
}

// scanModaliases returns the modalias values of the devices under
// sysDir not yet in seen, sorted by device path for a stable load order,
// and adds them to seen.
//
// It reads the devices the way udev's coldplug enumerates them, through
// the links sysfs keeps of every device: sysDir/bus/*/devices/* for
// devices on a bus (pci, virtio, acpi, scsi, ...) and sysDir/class/*/*
// for class devices (input). That is one modalias read per device. A
// walk of all of sysDir/devices reaches the same files but lists every
// directory of every device's attributes on the way: 430 ms for the first
// round on a q35 VM under software emulation and about 100 ms for each
// rescan. This one is cheaper, yet still 125-165 ms a scan there (some
// 250 devices), which is why Coldplug takes later devices from Events
// when it can.
//
// The classes in noModalias are not read: the kernel gives their devices
// no MODALIAS, and a driver binds to the parent device a bus list names.
// On a q35 VM they hold 93 of the 121 class devices, 71 of them ttys;
// skipping them took the boot's one scan, under emulation, from 380-430
// ms to 156 ms (each uevent read costs almost a millisecond there).
func scanModaliases(sysDir string, seen map[string]bool) []Device {
	var out []Device
	const classes = "class/*/*"
	for _, pattern := range []string{"bus/*/devices/*", classes} {
		links, _ := filepath.Glob(filepath.Join(sysDir, pattern))
		for _, l := range links {
			if pattern == classes && !classWithModalias(l) {
				continue
			}
			dir := l
			if t, err := os.Readlink(l); err == nil {
				if !filepath.IsAbs(t) {
					t = filepath.Join(filepath.Dir(l), t)
				}
				dir = filepath.Clean(t)
			}
			a := ueventModalias(filepath.Join(dir, "uevent"))
			key := dir + "\x00" + a
			if a == "" || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, Device{Dir: dir, Modalias: a})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}

// noModalias names the device classes whose devices the kernel
// announces without a MODALIAS (their uevent has MAJOR, MINOR and
// DEVNAME, or a network interface's INTERFACE and IFINDEX).
var noModalias = map[string]bool{"tty": true, "vc": true, "mem": true, "misc": true, "bdi": true, "block": true, "net": true}

// classWithModalias reports whether the class list link (sysDir/class/
// NAME/device) may name a device with a modalias.
func classWithModalias(link string) bool {
	return !noModalias[filepath.Base(filepath.Dir(link))]
}

// ueventModalias returns the MODALIAS of a device's uevent file, "" when
// it has none or cannot be read.
func ueventModalias(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if a, ok := strings.CutPrefix(line, "MODALIAS="); ok {
			return strings.TrimSpace(a)
		}
	}
	return ""
}
