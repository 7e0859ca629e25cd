package supervise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuietReader: a Read waits for data, returns what was written, ends
// with io.EOF once every write end is closed, and Close ends a Read that
// waits, with os.ErrClosed, and closes the read end.
func TestQuietReader(t *testing.T) {
	t.Run("data then EOF", func(t *testing.T) {
		r, w, err := newOutputPipe()
		require.NoError(t, err)
		defer r.Close()
		got := make(chan []byte, 1)
		go func() {
			b, _ := io.ReadAll(r)
			got <- b
		}()
		_, err = w.WriteString("one\n")
		require.NoError(t, err)
		_, err = w.WriteString("two\n")
		require.NoError(t, err)
		require.NoError(t, w.Close())
		select {
		case b := <-got:
			assert.Equal(t, "one\ntwo\n", string(b))
		case <-time.After(10 * time.Second):
			t.Fatal("ReadAll did not end after the write end closed")
		}
	})
	t.Run("Close ends a waiting Read", func(t *testing.T) {
		r, w, err := newOutputPipe()
		require.NoError(t, err)
		defer w.Close() // held open, as a grandchild would
		errc := make(chan error, 1)
		started := make(chan struct{})
		go func() {
			close(started)
			_, err := r.Read(make([]byte, 16))
			errc <- err
		}()
		<-started
		// The Read must still wait: nothing was written.
		select {
		case err := <-errc:
			t.Fatalf("Read returned before Close: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		require.NoError(t, r.Close())
		select {
		case err := <-errc:
			assert.ErrorIs(t, err, os.ErrClosed)
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end the waiting Read")
		}
		_, err = r.Read(make([]byte, 16))
		assert.ErrorIs(t, err, os.ErrClosed, "a Read after Close")
		assert.NoError(t, r.Close(), "a second Close")
		// The read end is closed: a write finds no reader.
		_, err = w.WriteString("x")
		assert.ErrorIs(t, err, syscall.EPIPE)
	})
}

// TestSupervisorOutputBurst: a child writes far more than the pipe holds
// (64 KiB) at once while the copy pauses between reads; every line
// arrives, whole and in order.
func TestSupervisorOutputBurst(t *testing.T) {
	const lines = 40000 // about 250 KB with the prefix
	var out testenv.Buffer
	s := &Supervisor{Name: "burst", Path: "/bin/sh", Args: []string{"-c", "seq 1 " + strconv.Itoa(lines) + "; sleep 30"},
		Stdout: &out, Backoff: Backoff{Initial: time.Hour}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "burst: %d\n", i)
	}
	waitFor(t, 30*time.Second, "all of the burst", func() bool { return len(out.String()) >= want.Len() })
	assert.Equal(t, want.String(), out.String())
}

// TestWaitGivesUpOnHeldPipe: the child exits but leaves a grandchild that
// keeps its output pipe open. Wait returns once WaitDelay has passed,
// with the output written before, instead of waiting for the grandchild.
func TestWaitGivesUpOnHeldPipe(t *testing.T) {
	var out testenv.Buffer
	cmd := sh("sleep 60 & echo $!")
	cmd.Stdout = &out
	cmd.WaitDelay = 200 * time.Millisecond
	p, err := Start(cmd)
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Wait still waits for the grandchild's pipe")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	require.NoError(t, err, "the child's output %q", out.String())
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill the grandchild %d: %v", pid, err)
	}
}
