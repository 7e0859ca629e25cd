package supervise

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// newOutputPipe returns a pipe for a child's output: the parent's read
// end, and the child's write end as a file to hand to exec.
//
// The read end is not an *os.File: os.Pipe registers its read end with
// the Go runtime's poller, which is woken by every write to it, even
// while no read waits (see outputPause). This one is read with read(2)
// and, when empty, waited on with poll(2) from the reading goroutine
// only, so a write wakes the parent only while a read waits.
func newOutputPipe() (io.ReadCloser, *os.File, error) {
	var data, stop [2]int
	if err := unix.Pipe2(data[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	// Non-blocking on the parent's side only: O_NONBLOCK belongs to the
	// open file, and the child's end is another one.
	if err := unix.SetNonblock(data[0], true); err != nil {
		unix.Close(data[0])
		unix.Close(data[1])
		return nil, nil, err
	}
	if err := unix.Pipe2(stop[:], unix.O_CLOEXEC); err != nil {
		unix.Close(data[0])
		unix.Close(data[1])
		return nil, nil, err
	}
	r := &quietReader{fd: data[0], stopR: stop[0], stopW: stop[1]}
	return r, os.NewFile(uintptr(data[1]), "|1"), nil
}

// quietReader is the parent's end of an output pipe. Close may be called
// while a Read waits: it ends that Read with os.ErrClosed, as closing an
// *os.File would (a grandchild may keep the pipe open forever).
type quietReader struct {
	fd    int // the pipe's read end, non-blocking
	stopR int // Close closes stopW; a waiting poll(2) sees stopR hang up
	stopW int

	closing  atomic.Bool
	stopOnce sync.Once
	mu       sync.Mutex // held while a Read uses fd and stopR
	released bool       // fd and stopR closed; under mu
}

func (r *quietReader) Read(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.released || r.closing.Load() {
			return 0, os.ErrClosed
		}
		n, err := unix.Read(r.fd, b)
		switch {
		case err == nil && n == 0 && len(b) > 0:
			return 0, io.EOF // every write end is closed
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EAGAIN):
			return 0, &os.PathError{Op: "read", Path: "|0", Err: err}
		}
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}, {Fd: int32(r.stopR), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return 0, &os.PathError{Op: "poll", Path: "|0", Err: err}
		}
	}
}

// Close ends a waiting Read and closes the pipe's read end. It may be
// called more than once, and from any goroutine.
func (r *quietReader) Close() error {
	r.closing.Store(true)
	r.stopOnce.Do(func() { unix.Close(r.stopW) })
	r.mu.Lock() // a waiting Read returns first: its poll saw stopR hang up
	defer r.mu.Unlock()
	if !r.released {
		r.released = true
		unix.Close(r.fd)
		unix.Close(r.stopR)
	}
	return nil
}
