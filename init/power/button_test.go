package power

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// event encodes a struct input_event as the kernel writes it.
func event(typ, code uint16, value int32) []byte {
	b := make([]byte, eventSize)
	for i := 0; i < 2*wordBytes; i++ {
		b[i] = 0xAA // a timestamp the parser must skip
	}
	binary.NativeEndian.PutUint16(b[2*wordBytes:], typ)
	binary.NativeEndian.PutUint16(b[2*wordBytes+2:], code)
	binary.NativeEndian.PutUint32(b[2*wordBytes+4:], uint32(value))
	return b
}

func TestEventSize(t *testing.T) {
	if strconv.IntSize == 64 {
		assert.Equal(t, 24, eventSize)
	} else {
		assert.Equal(t, 16, eventSize)
	}
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name  string
		raw   []byte
		want  inputEvent
		press bool
	}{
		{"power press", event(1, 116, 1), inputEvent{1, 116, 1}, true},
		{"power release", event(1, 116, 0), inputEvent{1, 116, 0}, false},
		{"power autorepeat", event(1, 116, 2), inputEvent{1, 116, 2}, false},
		{"other key", event(1, 142, 1), inputEvent{1, 142, 1}, false},
		{"sync report", event(0, 0, 0), inputEvent{0, 0, 0}, false},
		{"negative value", event(2, 0, -5), inputEvent{2, 0, -5}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseEvent(tt.raw)
			assert.Equal(t, tt.want, got, "parseEvent(%x)", tt.raw)
			assert.Equal(t, tt.press, got.isPowerPress())
		})
	}
}

func TestReadEvents(t *testing.T) {
	var stream []byte
	for _, e := range [][]byte{
		event(1, 116, 1), event(0, 0, 0), event(1, 116, 0), event(0, 0, 0),
		event(1, 116, 1), event(1, 116, 2), event(1, 116, 0),
	} {
		stream = append(stream, e...)
	}
	for _, tc := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole events", func(r io.Reader) io.Reader { return r }},
		{"one byte at a time", iotest.OneByteReader},
		{"half reads", iotest.HalfReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []inputEvent
			presses := 0
			err := readEvents(tc.wrap(bytes.NewReader(append(stream, 1, 2, 3))), func(e inputEvent) {
				got = append(got, e)
				if e.isPowerPress() {
					presses++
				}
			})
			require.ErrorIs(t, err, io.EOF)
			assert.Len(t, got, 7, "a trailing partial event is not decoded")
			assert.Equal(t, 2, presses)
		})
	}
}

func TestHasKey(t *testing.T) {
	tests := []struct {
		name   string
		bitmap string
		want   bool
	}{
		{"ACPI power button", "10000000000000 0\n", true},
		{"AT keyboard", "402000000 3803078f800d001 feffffdfffefffff fffffffffffffffe\n", true},
		{"sleep button", "4000 0 0\n", false},
		{"lid switch", "0\n", false},
		{"empty", "", false},
		{"garbage", "zz 0", false},
	}
	if strconv.IntSize != 64 {
		t.Skip("bitmaps above are from a 64-bit kernel")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, hasKey(tt.bitmap, keyPower), "hasKey(%q, KEY_POWER)", tt.bitmap)
		})
	}
}

// fakeSysfs writes /sys/class/input/<name>/device/{name,capabilities/key}.
func fakeSysfs(t *testing.T, devs map[string][2]string) string {
	t.Helper()
	root := t.TempDir()
	for node, nk := range devs {
		dir := filepath.Join(root, node, "device")
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "capabilities"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "name"), []byte(nk[0]+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "capabilities", "key"), []byte(nk[1]+"\n"), 0o644))
	}
	return root
}

func TestFind(t *testing.T) {
	sys := fakeSysfs(t, map[string][2]string{
		"event0":  {"Power Button", "10000000000000 0"},
		"event1":  {"Sleep Button", "4000 0 0"},
		"event2":  {"AT Translated Set 2 keyboard", "402000000 3803078f800d001 feffffdfffefffff fffffffffffffffe"},
		"event10": {"Power Button", "0"}, // by name alone
		"event3":  {"Video Bus", "3e000b00000000 0 0 0"},
		"input0":  {"Power Button", "10000000000000 0"}, // not an event node
		"mouse0":  {"Power Button", ""},
	})
	b := &PowerButton{SysClass: sys, Dev: "/dev/input"}
	got, err := b.Find()
	require.NoError(t, err)
	want := []string{"/dev/input/event0", "/dev/input/event10"}
	if strconv.IntSize == 64 {
		want = []string{"/dev/input/event0", "/dev/input/event2", "/dev/input/event10"}
	}
	assert.Equal(t, want, got)

	_, err = (&PowerButton{SysClass: filepath.Join(sys, "missing")}).Find()
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestWatchNoDevice(t *testing.T) {
	sys := fakeSysfs(t, map[string][2]string{"event1": {"Sleep Button", "4000 0 0"}})
	_, err := (&PowerButton{SysClass: sys, Dev: t.TempDir()}).Watch(context.Background())
	assert.ErrorContains(t, err, "no input device with a power key")

	sys = fakeSysfs(t, map[string][2]string{"event0": {"Power Button", ""}})
	_, err = (&PowerButton{SysClass: sys, Dev: t.TempDir()}).Watch(context.Background())
	assert.ErrorIs(t, err, os.ErrNotExist)
}
