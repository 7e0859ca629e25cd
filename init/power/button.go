package power

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Input event constants from linux/input-event-codes.h.
const (
	evKey    = 1   // EV_KEY
	keyPower = 116 // KEY_POWER
)

// wordBytes is the size of a C long: struct input_event starts with a
// struct timeval of two longs, and sysfs capability bitmaps are printed in
// longs. (A 32-bit init on a 64-bit kernel would get both wrong; etcdbox
// builds init for the kernel's architecture.)
const wordBytes = strconv.IntSize / 8

// eventSize is sizeof(struct input_event): 24 bytes on 64-bit, 16 on 32.
const eventSize = 2*wordBytes + 8

// inputEvent is struct input_event without its timestamp.
type inputEvent struct {
	Type  uint16
	Code  uint16
	Value int32
}

// isPowerPress reports a press (not a release or an autorepeat) of the
// power key.
func (e inputEvent) isPowerPress() bool {
	return e.Type == evKey && e.Code == keyPower && e.Value == 1
}

// parseEvent decodes one struct input_event in native byte order.
func parseEvent(b []byte) inputEvent {
	b = b[2*wordBytes : eventSize]
	return inputEvent{
		Type:  binary.NativeEndian.Uint16(b[0:2]),
		Code:  binary.NativeEndian.Uint16(b[2:4]),
		Value: int32(binary.NativeEndian.Uint32(b[4:8])),
	}
}

// readEvents reads input events from r until it fails, calling fn for each.
// evdev returns whole events per read; a reader that splits them is handled
// anyway.
func readEvents(r io.Reader, fn func(inputEvent)) error {
	buf := make([]byte, 64*eventSize)
	have := 0
	for {
		n, err := r.Read(buf[have:])
		have += n
		i := 0
		for ; have-i >= eventSize; i += eventSize {
			fn(parseEvent(buf[i : i+eventSize]))
		}
		have = copy(buf, buf[i:have])
		if err != nil {
			return err
		}
	}
}

// hasKey reports whether a sysfs key capability bitmap (capabilities/key:
// hex longs, most significant first) has the bit for code.
func hasKey(bitmap string, code int) bool {
	words := strings.Fields(bitmap)
	bits := 8 * wordBytes
	i := code / bits
	if i >= len(words) {
		return false
	}
	w, err := strconv.ParseUint(words[len(words)-1-i], 16, bits)
	if err != nil {
		return false
	}
	return w&(1<<(code%bits)) != 0
}

// PowerButton watches the input devices that have a power key: the ACPI
// "Power Button" devices (QEMU's system_powerdown, a cloud's stop button)
// and any keyboard with a power key. It needs the button and evdev kernel
// modules; devtmpfs creates the /dev/input nodes.
type PowerButton struct {
	// SysClass is where input devices are listed, default /sys/class/input.
	SysClass string
	// Dev holds the event device nodes, default /dev/input.
	Dev string
	// Log prints init's messages.
	Log func(format string, args ...any)
}

func (b *PowerButton) defaults() {
	if b.SysClass == "" {
		b.SysClass = "/sys/class/input"
	}
	if b.Dev == "" {
		b.Dev = "/dev/input"
	}
}

// Find returns the event device nodes that report a power key, in event
// number order, e.g. ["/dev/input/event0"].
func (b *PowerButton) Find() ([]string, error) {
	b.defaults()
	entries, err := os.ReadDir(b.SysClass)
	if err != nil {
		return nil, fmt.Errorf("list input devices: %w", err)
	}
	type found struct {
		n    int
		path string
	}
	var fs []found
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "event"))
		if !strings.HasPrefix(e.Name(), "event") || err != nil {
			continue
		}
		dir := filepath.Join(b.SysClass, e.Name(), "device")
		name, _ := os.ReadFile(filepath.Join(dir, "name"))
		keys, _ := os.ReadFile(filepath.Join(dir, "capabilities", "key"))
		if strings.Contains(string(name), "Power Button") || hasKey(string(keys), keyPower) {
			fs = append(fs, found{n, filepath.Join(b.Dev, e.Name())})
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].n < fs[j].n })
	paths := make([]string, len(fs))
	for i, f := range fs {
		paths[i] = f.path
	}
	return paths, nil
}

// Watch opens every device Find returns and sends on the returned channel
// when the power key is pressed. Presses while one is pending are dropped.
// The channel is never closed; the devices are closed when ctx ends. Watch
// fails when no device could be opened.
func (b *PowerButton) Watch(ctx context.Context) (<-chan struct{}, error) {
	paths, err := b.Find()
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no input device with a power key in %s", b.SysClass)
	}
	ch := make(chan struct{}, 1)
	var opened []string
	var errs []error
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		opened = append(opened, p)
		go func() {
			<-ctx.Done()
			_ = f.Close() // ends the read below
		}()
		go func() {
			err := readEvents(f, func(e inputEvent) {
				if e.isPowerPress() {
					select {
					case ch <- struct{}{}:
					default:
					}
				}
			})
			if ctx.Err() == nil && b.Log != nil {
				b.Log("power button %s: %v", p, err)
			}
		}()
	}
	if len(opened) == 0 {
		return nil, fmt.Errorf("open power button: %w", errors.Join(errs...))
	}
	if b.Log != nil {
		b.Log("power button: watching %s", strings.Join(opened, ", "))
		for _, err := range errs {
			b.Log("power button: %v", err)
		}
	}
	return ch, nil
}
