package kmod

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uevent builds a message as the kernel sends it.
func uevent(head string, kv ...string) []byte {
	return []byte(head + "\x00" + strings.Join(kv, "\x00") + "\x00")
}

func TestParseUevent(t *testing.T) {
	virtio := uevent("add@/devices/pci0000:00/0000:00:02.0/virtio0",
		"ACTION=add", "DEVPATH=/devices/pci0000:00/0000:00:02.0/virtio0", "SUBSYSTEM=virtio",
		"MODALIAS=virtio:d00000002v00001AF4", "SEQNUM=1234")
	d, ok := parseUevent(virtio)
	require.True(t, ok)
	assert.Equal(t, Device{Dir: "/devices/pci0000:00/0000:00:02.0/virtio0", Modalias: "virtio:d00000002v00001AF4"}, d)

	for _, tt := range []struct {
		name string
		msg  []byte
	}{
		{"remove", uevent("remove@/devices/x", "ACTION=remove", "DEVPATH=/devices/x", "MODALIAS=pci:v1")},
		{"bind", uevent("bind@/devices/x", "ACTION=bind", "DEVPATH=/devices/x", "MODALIAS=pci:v1")},
		{"no modalias", uevent("add@/devices/virtual/net/lo", "ACTION=add", "DEVPATH=/devices/virtual/net/lo", "SUBSYSTEM=net")},
		{"udev's form", uevent("libudev", "ACTION=add", "DEVPATH=/devices/x", "MODALIAS=pci:v1")},
		{"no header", []byte("ACTION=add")},
		{"empty", nil},
		{"devpath outside /devices", uevent("add@/module/x", "ACTION=add", "DEVPATH=/module/x", "MODALIAS=pci:v1")},
		{"devpath climbing out", uevent("add@/devices/../../etc", "ACTION=add", "DEVPATH=/devices/../../etc", "MODALIAS=pci:v1")},
		{"modalias with a newline", uevent("add@/devices/x", "ACTION=add", "DEVPATH=/devices/x", "MODALIAS=pci:v1\nMODALIAS=x")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ok := parseUevent(tt.msg)
			assert.False(t, ok)
		})
	}
}

// FuzzParseUevent: any message parses or is refused, never a panic, and
// a device it returns has a clean path under /devices and a modalias.
func FuzzParseUevent(f *testing.F) {
	f.Add(uevent("add@/devices/a", "ACTION=add", "DEVPATH=/devices/a", "MODALIAS=pci:v1"))
	f.Add([]byte("libudev\x00\xfe\xed\xca\xfe"))
	f.Add([]byte("add@\x00=\x00==\x00ACTION"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, ok := parseUevent(msg)
		if !ok {
			return
		}
		if d.Modalias == "" || !strings.HasPrefix(d.Dir, "/devices/") || path.Clean(d.Dir) != d.Dir {
			t.Fatalf("accepted %q as %+v", msg, d)
		}
	})
}

// fakeEvents is a DeviceEvents whose announcements the test queues.
type fakeEvents struct {
	queue  []Device
	lost   bool
	err    error
	calls  int
	closed bool
}

func (f *fakeEvents) Added() ([]Device, bool, error) {
	f.calls++
	q, lost, err := f.queue, f.lost, f.err
	f.queue, f.lost, f.err = nil, false, nil
	return q, lost, err
}

func (f *fakeEvents) Close() error { f.closed = true; return nil }

func TestColdplugEvents(t *testing.T) {
	var dep, alias strings.Builder
	for _, m := range []string{"m0", "m1", "m2", "quiet"} {
		fmt.Fprintf(&dep, "kernel/%s.ko:\n", m)
		fmt.Fprintf(&alias, "alias test:%s %s\n", m, m)
	}
	dir := writeIndex(t, map[string]string{"modules.dep": dep.String(), "modules.alias": alias.String()})

	t.Run("announced devices, no rescan", func(t *testing.T) {
		sys := fakeSysfs(t.TempDir())
		sys.device(t, "0", "test:m0")
		ev := &fakeEvents{}
		dev := func(rel, alias string) Device {
			return Device{Dir: filepath.Join(string(sys), "devices", rel), Modalias: alias}
		}
		rec := &recorder{hook: map[string]func(){
			"m0": func() {
				ev.queue = append(ev.queue, dev("1", "test:m1"))
				// In sysfs but never announced: found only by a rescan,
				// which announcements make unneeded.
				sys.device(t, "quiet", "test:quiet")
			},
			// m0's device again (announced and scanned alike) and a new
			// one.
			"m1": func() { ev.queue = append(ev.queue, dev("0", "test:m0"), dev("2", "test:m2")) },
		}}
		var logs []string
		l := &Loader{Dir: dir, Insert: rec.insert, Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) },
			Events: func(sysDir string) (DeviceEvents, error) {
				assert.Equal(t, string(sys), sysDir)
				return ev, nil
			}}
		loaded, err := l.Coldplug(string(sys))
		require.NoError(t, err)
		assert.Equal(t, []string{"m0", "m1", "m2"}, loaded)
		assert.Equal(t, 3, ev.calls, "one look after each round, the last finding nothing")
		assert.True(t, ev.closed)
		assert.Empty(t, logs)
	})

	for _, tt := range []struct {
		name    string
		events  func(*fakeEvents) (DeviceEvents, error)
		failAt  func(*fakeEvents)
		wantLog string
	}{
		{"lost announcements: rescan", func(ev *fakeEvents) (DeviceEvents, error) { return ev, nil },
			func(ev *fakeEvents) { ev.lost = true }, "device events incomplete (lost true, <nil>): rescanning sysfs"},
		{"failed read: rescan", func(ev *fakeEvents) (DeviceEvents, error) { return ev, nil },
			func(ev *fakeEvents) { ev.err = errors.New("read uevent socket: boom") }, "read uevent socket: boom"},
		{"no source: rescans", func(*fakeEvents) (DeviceEvents, error) { return nil, errors.New("uevent socket: denied") },
			func(*fakeEvents) {}, "no device events (uevent socket: denied)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sys := fakeSysfs(t.TempDir())
			sys.device(t, "0", "test:m0")
			ev := &fakeEvents{}
			rec := &recorder{hook: map[string]func(){
				"m0": func() { sys.device(t, "1", "test:m1"); tt.failAt(ev) },
			}}
			var logs []string
			l := &Loader{Dir: dir, Insert: rec.insert, Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) },
				Events: func(string) (DeviceEvents, error) { return tt.events(ev) }}
			loaded, err := l.Coldplug(string(sys))
			require.NoError(t, err)
			assert.Equal(t, []string{"m0", "m1"}, loaded, "the rescan finds what was not announced")
			require.NotEmpty(t, logs)
			assert.Contains(t, logs[0], tt.wantLog)
		})
	}
}

// TestColdplugAfterLoadPresent: with an event source, the coldplug after
// LoadPresent starts from LoadPresent's scan and the devices announced
// since; it scans sysfs again only when announcements were lost.
func TestColdplugAfterLoadPresent(t *testing.T) {
	var dep, alias strings.Builder
	for _, m := range []string{"wd", "m1", "m2", "quiet"} {
		fmt.Fprintf(&dep, "kernel/%s.ko:\n", m)
		fmt.Fprintf(&alias, "alias test:%s %s\n", m, m)
	}
	dir := writeIndex(t, map[string]string{"modules.dep": dep.String(), "modules.alias": alias.String()})
	isWD := func(name, _ string) bool { return name == "wd" }

	for _, tt := range []struct {
		name string
		lost bool
		want []string
	}{
		// m1's device is gone from the lists a scan reads, and quiet's
		// was never announced: only a rescan would change either.
		{"carried scan", false, []string{"m1", "m2"}},
		{"lost announcements: rescan", true, []string{"m1", "m2", "quiet"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sys := fakeSysfs(t.TempDir())
			sys.device(t, "0", "test:wd")
			sys.device(t, "1", "test:m1")
			ev := &fakeEvents{}
			opened := 0
			rec := &recorder{hook: map[string]func(){
				"wd": func() {
					sys.device(t, "2", "test:m2")
					ev.queue = append(ev.queue, Device{Dir: filepath.Join(string(sys), "devices", "2"), Modalias: "test:m2"})
				},
			}}
			l := &Loader{Dir: dir, Insert: rec.insert, Events: func(string) (DeviceEvents, error) { opened++; return ev, nil }}
			loaded, err := l.LoadPresent(string(sys), isWD)
			require.NoError(t, err)
			assert.Equal(t, []string{"wd"}, loaded)
			assert.False(t, ev.closed, "the source stays open for the coldplug")

			require.NoError(t, os.Remove(filepath.Join(string(sys), "bus", "test", "devices", "1")))
			sys.device(t, "3", "test:quiet")
			ev.lost = tt.lost
			loaded, err = l.Coldplug(string(sys))
			require.NoError(t, err)
			assert.ElementsMatch(t, tt.want, loaded)
			assert.Equal(t, 1, opened, "one source for both")
			assert.True(t, ev.closed)
			assert.Equal(t, []string{"wd"}, rec.inserted[:1])

			// The carry is used once: the next coldplug scans afresh.
			ev.closed = false
			loaded, err = l.Coldplug(string(sys))
			require.NoError(t, err)
			assert.Equal(t, 2, opened)
			if !tt.lost {
				assert.Equal(t, []string{"quiet"}, loaded, "a fresh scan finds the unannounced device")
			} else {
				assert.Empty(t, loaded)
			}
		})
	}
}
