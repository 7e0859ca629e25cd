package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/etcdbox/etcdbox/init/console"
)

// logRecorder is the init's console: a console.Logger writing into a buffer.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *logRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *logRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Split(strings.TrimSuffix(r.buf.String(), "\n"), "\n")
}

func (r *logRecorder) has(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Contains(r.buf.String(), sub)
}

// newSupervisor returns an etcd-like supervisor running script, logging
// through a console.Logger, with its output in a ring.
func newSupervisor(script string, args ...string) (*Supervisor, *logRecorder, *console.Ring) {
	rec := &logRecorder{}
	logger := console.New(rec)
	ring := console.NewRing(100)
	s := &Supervisor{
		Name:    "etcd",
		Path:    "/bin/sh",
		Args:    append([]string{"-c", script, "sh"}, args...),
		Stdout:  ring,
		Backoff: Backoff{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond, Factor: 2, Reset: time.Hour},
		Log:     logger.Printf,
	}
	return s, rec, ring
}

func runInBackground(t *testing.T, s *Supervisor) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- s.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = s.Stop(time.Second)
		<-s.Done()
	})
	return errc
}

func waitRun(t *testing.T, errc <-chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

var restartRE = regexp.MustCompile(`^etcdbox: etcd exited: (.*); restarting in (\S+) \(restart (\d+)\)$`)

type restart struct {
	status string
	delay  time.Duration
	n      int
}

func restarts(t *testing.T, rec *logRecorder) []restart {
	t.Helper()
	var rs []restart
	for _, l := range rec.lines() {
		m := restartRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[2])
		require.NoError(t, err)
		n, err := strconv.Atoi(m[3])
		require.NoError(t, err)
		rs = append(rs, restart{m[1], d, n})
	}
	return rs
}

func TestSupervisorRestartsWithGrowingBackoff(t *testing.T) {
	s, rec, ring := newSupervisor("echo hello; exit 3")
	var exits []int
	var mu sync.Mutex
	s.OnExit = func(err error, n int) {
		var ee *ExitError
		if assert.ErrorAs(t, err, &ee) {
			assert.Equal(t, 3, ee.ExitCode())
		}
		mu.Lock()
		exits = append(exits, n)
		mu.Unlock()
	}
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "6 restarts", func() bool { return s.Restarts() >= 6 })
	require.NoError(t, s.Stop(5*time.Second))
	require.NoError(t, waitRun(t, errc))

	rs := restarts(t, rec)
	require.GreaterOrEqual(t, len(rs), 6, "log:\n%s", strings.Join(rec.lines(), "\n"))
	want := []time.Duration{10, 20, 40, 80, 80, 80}
	for i, w := range want {
		assert.Equal(t, restart{"exit status 3", w * time.Millisecond, i + 1}, rs[i])
	}
	assert.True(t, rec.has("etcdbox: etcd exited: exit status 3; restarting in 10ms (restart 1)\n"))
	mu.Lock()
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, exits[:6])
	mu.Unlock()
	assert.Contains(t, ring.Lines(), "etcd: hello")
}

func TestSupervisorBackoffResetsAfterStableRun(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "run-long")
	// With the marker present, one run lasts longer than Reset.
	s, rec, _ := newSupervisor(`if [ -e "$1" ]; then rm -f "$1"; sleep 1.5; fi; exit 3`, marker)
	s.Backoff.Reset = time.Second
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "3 restarts", func() bool { return s.Restarts() >= 3 })
	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	waitFor(t, 10*time.Second, "the long run to start", func() bool {
		_, err := os.Stat(marker)
		return errors.Is(err, os.ErrNotExist)
	})
	long := s.Restarts()
	waitFor(t, 10*time.Second, "2 restarts after the long run", func() bool { return s.Restarts() >= long+3 })
	require.NoError(t, s.Stop(5*time.Second))
	require.NoError(t, waitRun(t, errc))

	rs := restarts(t, rec)
	require.GreaterOrEqual(t, len(rs), long+2)
	assert.Equal(t, 10*time.Millisecond, rs[0].delay)
	assert.Equal(t, 20*time.Millisecond, rs[1].delay)
	assert.Equal(t, 40*time.Millisecond, rs[2].delay)
	// Restart long+1 follows the long run: back to Initial, then growing.
	assert.Equal(t, 10*time.Millisecond, rs[long].delay, "after the stable run; restarts: %v", rs)
	assert.Equal(t, 20*time.Millisecond, rs[long+1].delay, "restarts: %v", rs)
	assert.Greater(t, rs[long-1].delay, 10*time.Millisecond, "before the stable run; restarts: %v", rs)
}

func TestSupervisorRestartsAfterKill(t *testing.T) {
	s, rec, ring := newSupervisor(`echo "started $$"; exec sleep 30`)
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "first child", func() bool { return s.Pid() != 0 })
	first := s.Pid()
	waitFor(t, 10*time.Second, "first child's output", func() bool {
		return contains(ring.Lines(), fmt.Sprintf("etcd: started %d", first))
	})
	require.NoError(t, unix.Kill(first, unix.SIGKILL))
	waitFor(t, 10*time.Second, "a new child", func() bool { p := s.Pid(); return p != 0 && p != first })
	assert.True(t, rec.has("etcdbox: etcd exited: signal: killed; restarting in 10ms (restart 1)\n"))
	require.NoError(t, s.Stop(5*time.Second)) // sleep dies of SIGTERM
	require.NoError(t, waitRun(t, errc))
	assert.Equal(t, 0, s.Pid())
	assert.True(t, rec.has("etcdbox: etcd stopped: signal: terminated\n"))
}

func TestSupervisorStopGraceful(t *testing.T) {
	s, rec, ring := newSupervisor(`trap 'kill $!; echo "got TERM"; exit 0' TERM; echo ready; sleep 30 & wait`)
	var last error = errors.New("OnExit not called")
	s.OnExit = func(err error, _ int) { last = err }
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
	start := time.Now()
	require.NoError(t, s.Stop(10*time.Second))
	assert.Less(t, time.Since(start), 5*time.Second)
	require.NoError(t, waitRun(t, errc))
	assert.NoError(t, last)
	assert.Contains(t, ring.Lines(), "etcd: got TERM")
	assert.True(t, rec.has("etcdbox: etcd stopped: exit status 0\n"))
	assert.Equal(t, 0, s.Restarts())
}

func TestSupervisorStopKillsWhenTermIgnored(t *testing.T) {
	s, rec, ring := newSupervisor(`trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
	start := time.Now()
	err := s.Stop(300 * time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed after 300ms")
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	require.NoError(t, waitRun(t, errc))
	assert.True(t, rec.has("sending SIGKILL"))
	assert.True(t, rec.has("etcdbox: etcd stopped: signal: killed\n"))
	assert.Equal(t, 0, s.Restarts())
}

func TestSupervisorStopDuringBackoff(t *testing.T) {
	s, _, _ := newSupervisor("exit 1")
	s.Backoff = Backoff{Initial: time.Hour}
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "first exit", func() bool { return s.Restarts() == 1 })
	require.NoError(t, s.Stop(time.Second))
	require.NoError(t, waitRun(t, errc))
}

func TestSupervisorStopBeforeRun(t *testing.T) {
	s, _, _ := newSupervisor("echo should not run")
	require.NoError(t, s.Stop(time.Second))
	require.NoError(t, s.Run(context.Background()))
	assert.Equal(t, 0, s.Restarts())
	assert.ErrorContains(t, s.Run(context.Background()), "twice")
}

func TestSupervisorContextCancel(t *testing.T) {
	s, rec, ring := newSupervisor(`echo ready; exec sleep 30`)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
	cancel()
	require.ErrorIs(t, waitRun(t, errc), context.Canceled)
	assert.True(t, rec.has("etcdbox: etcd stopped: signal: terminated\n"))
}

func TestSupervisorStartFailureRetries(t *testing.T) {
	s, rec, _ := newSupervisor("")
	s.Path = filepath.Join(t.TempDir(), "no-etcd")
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "2 retries", func() bool { return s.Restarts() >= 2 })
	require.NoError(t, s.Stop(time.Second))
	require.NoError(t, waitRun(t, errc))
	assert.True(t, rec.has("etcdbox: etcd did not start: "), "log: %v", rec.lines())
}

func TestSupervisorFlushesPartialLine(t *testing.T) {
	s, _, ring := newSupervisor(`printf 'panic: no newline' >&2; exit 2`)
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "partial line", func() bool { return contains(ring.Lines(), "etcd: panic: no newline") })
	require.NoError(t, s.Stop(time.Second))
	require.NoError(t, waitRun(t, errc))
}

func TestSupervisorSeparateStderr(t *testing.T) {
	s, _, ring := newSupervisor(`echo out; echo err >&2; echo ready; exec sleep 30`)
	errRing := console.NewRing(10)
	s.Stderr = errRing
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
	require.NoError(t, s.Stop(5*time.Second))
	require.NoError(t, waitRun(t, errc))
	assert.Equal(t, []string{"etcd: out", "etcd: ready"}, ring.Lines())
	assert.Equal(t, []string{"etcd: err"}, errRing.Lines())
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func TestSupervisorOwnProcessGroup(t *testing.T) {
	s, _, ring := newSupervisor(`echo ready; exec sleep 30`)
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
	pgid, err := unix.Getpgid(s.Pid())
	require.NoError(t, err)
	assert.Equal(t, s.Pid(), pgid, "child leads its own process group")
	require.NoError(t, s.Stop(5*time.Second))
	require.NoError(t, waitRun(t, errc))
}

// TestSupervisorAlive: Run calls Alive while the child runs and while it
// waits to restart one.
func TestSupervisorAlive(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		backoff Backoff
	}{
		{"child running", `echo ready; exec sleep 30`, Backoff{}},
		{"waiting to restart", `exit 1`, Backoff{Initial: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newSupervisor(tt.script)
			if tt.backoff != (Backoff{}) {
				s.Backoff = tt.backoff
			}
			var beats atomic.Int64
			s.Alive = func() { beats.Add(1) }
			s.aliveEvery = 5 * time.Millisecond
			errc := runInBackground(t, s)
			// Far more beats than loop turns: the waiting loop beats.
			waitFor(t, 10*time.Second, "10 beats", func() bool { return beats.Load() >= 10 })
			require.NoError(t, s.Stop(5*time.Second))
			require.NoError(t, waitRun(t, errc))
			assert.LessOrEqual(t, s.Restarts(), 1, "the beats came from waiting, not from restarts")
		})
	}
}

// TestSupervisorStopFinished: a child that ignores SIGTERM, but marks on
// it that it is done with what matters, is ended by SIGKILL as soon as
// the Finished check sees the mark, long before Stop's timeout, and that
// is a normal stop.
func TestSupervisorStopFinished(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "finished")
	s, rec, ring := newSupervisor(`trap 'touch "$1"' TERM; echo ready; while :; do sleep 0.05; done`, mark)
	var asked atomic.Int64
	s.Finished = func(pid int) func() bool {
		asked.Store(int64(pid))
		return func() bool {
			_, err := os.Stat(mark)
			return err == nil
		}
	}
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
	pid := s.Pid()
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(time.Hour) }()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Stop still waits 30s after the child marked itself finished")
	}
	require.NoError(t, waitRun(t, errc))
	assert.Equal(t, int64(pid), asked.Load(), "Finished is asked about the running child")
	assert.FileExists(t, mark, "SIGTERM came first")
	assert.True(t, rec.has(fmt.Sprintf("etcdbox: stop etcd (pid %d): done with what matters ", pid)), rec.lines())
	assert.True(t, rec.has("etcdbox: etcd stopped: signal: killed\n"))
	assert.False(t, rec.has("sending SIGKILL"), "not the timeout's SIGKILL")
}

// TestSupervisorStopFinishedUnsure: without a check (Finished returns nil)
// or with one that never reports true, Stop waits for the child as before.
func TestSupervisorStopFinishedUnsure(t *testing.T) {
	for name, check := range map[string]func() bool{"no check": nil, "never": func() bool { return false }} {
		t.Run(name, func(t *testing.T) {
			s, rec, ring := newSupervisor(`trap 'kill $!; echo "got TERM"; exit 0' TERM; echo ready; sleep 30 & wait`)
			s.Finished = func(int) func() bool { return check }
			errc := runInBackground(t, s)
			waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
			require.NoError(t, s.Stop(10*time.Second))
			require.NoError(t, waitRun(t, errc))
			assert.Contains(t, ring.Lines(), "etcd: got TERM")
			assert.True(t, rec.has("etcdbox: etcd stopped: exit status 0\n"), rec.lines())
			assert.False(t, rec.has("done with what matters"))
		})
	}
}

// TestSupervisorStopping: the Stopping hook runs after the SIGTERM, with
// the child's pid, and may end the child's wait (here: the child ignores
// SIGTERM until a file appears, which the hook writes); Stop returns only
// after the hook has seen the child exit and returned.
func TestSupervisorStopping(t *testing.T) {
	dir := t.TempDir()
	termed, release := filepath.Join(dir, "termed"), filepath.Join(dir, "release")
	s, rec, ring := newSupervisor(`trap 'touch "$1"' TERM; echo ready; while [ ! -e "$2" ]; do sleep 0.05; done; exit 0`, termed, release)
	var hookPid atomic.Int64
	var sawTerm, returned atomic.Bool
	s.Stopping = func(pid int, exited <-chan struct{}) {
		hookPid.Store(int64(pid))
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) { // the child's trap runs between its sleeps
			if _, err := os.Stat(termed); err == nil {
				sawTerm.Store(true)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		os.WriteFile(release, nil, 0o644)
		<-exited
		returned.Store(true)
	}
	errc := runInBackground(t, s)
	waitFor(t, 10*time.Second, "child ready", func() bool { return contains(ring.Lines(), "etcd: ready") })
	pid := s.Pid()
	require.NoError(t, s.Stop(time.Hour), "the child exits once the hook releases it, long before the timeout")
	assert.True(t, returned.Load(), "Stop waited for the hook to return")
	require.NoError(t, waitRun(t, errc))
	assert.Equal(t, int64(pid), hookPid.Load(), "the hook is given the running child's pid")
	assert.True(t, sawTerm.Load(), "the hook runs after the SIGTERM")
	assert.True(t, rec.has("etcdbox: etcd stopped: exit status 0\n"), rec.lines())
}
