package qemu

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWaitConsole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString("\x1b[2Jboot\r\netcdbox: etcd ready\r\n")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})

	m, err := waitConsole(ctx, path, 0, []string{"etcdbox: fatal:", "etcdbox: etcd ready"}, done)
	require.NoError(t, err)
	assert.Equal(t, ConsoleMatch{Text: "etcdbox: etcd ready", Line: "etcdbox: etcd ready", Offset: 10, Next: 31}, m)

	// From a mark, only later lines count; they arrive while it waits,
	// the marker split across writes.
	go func() {
		time.Sleep(3 * consolePoll)
		f.WriteString("noise\netcdbox: etcd re")
		time.Sleep(3 * consolePoll)
		f.WriteString("ady\n")
	}()
	m2, err := waitConsole(ctx, path, m.Next, []string{"etcdbox: etcd ready"}, done)
	require.NoError(t, err)
	assert.Equal(t, m.Next+6, m2.Offset)
	assert.Equal(t, m2.Offset+20, m2.Next)

	short, cancelShort := context.WithTimeout(ctx, 3*consolePoll)
	defer cancelShort()
	_, err = waitConsole(short, path, m2.Next, []string{"etcdbox: etcd ready"}, done)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// After the writer exits, an unterminated last line counts, and
	// waiting for text that never came fails at once.
	f.WriteString("etcdbox: shutdown complete")
	close(done)
	m3, err := waitConsole(ctx, path, m2.Next, []string{"shutdown complete"}, done)
	require.NoError(t, err)
	assert.Equal(t, "etcdbox: shutdown complete", m3.Line)
	_, err = waitConsole(ctx, path, 0, []string{"never"}, done)
	assert.ErrorIs(t, err, ErrExited)
}

func TestWaitConsoleFileAppears(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	go func() {
		time.Sleep(2 * consolePoll)
		os.WriteFile(path, []byte("hello\n"), 0o644)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := waitConsole(ctx, path, 0, []string{"hello"}, nil)
	assert.NoError(t, err)
}

func TestPrintable(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"plain", "a\nb\n", "a\nb\n"},
		{"crlf", "a\r\nb\r\n", "a\nb\n"},
		{"csi", "\x1b[2J\x1b[01;01H\x1b[=3hBdsDxe: x\x1b[0m\x1b[37m\x1b[40m", "BdsDxe: x"},
		{"control", "a\x07b\x00c\td", "abc\td"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Printable(tt.in), "Printable(%q)", tt.in)
		})
	}
	assert.Equal(t, "c\nd", Tail("a\nb\nc\r\nd\r\n", 2))
	assert.Equal(t, "a", Tail("a", 5))
}
