package supervise

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// orphans records what the reaper collected without a registered owner.
var orphans = struct {
	sync.Mutex
	m map[int]Status
}{m: map[int]Status{}}

func TestMain(m *testing.M) {
	// Orphans of our children reparent to this process instead of the
	// real PID 1, as they would to etcdbox's init.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(1)
	}
	SetOrphanFunc(func(pid int, st Status) {
		orphans.Lock()
		defer orphans.Unlock()
		orphans.m[pid] = st
	})
	if err := StartReaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sh(script string, args ...string) *exec.Cmd {
	return exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
}

func TestRunExitStatus(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		wantErr  string
		wantCode int
	}{
		{"success", "exit 0", "", 0},
		{"exit 3", "exit 3", "exit status 3", 3},
		{"killed", "kill -9 $$", "signal: killed", -1},
		{"terminated", "kill -TERM $$", "signal: terminated", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), sh(tt.script))
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			var ee *ExitError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, tt.wantErr, err.Error())
			assert.Equal(t, tt.wantCode, ee.ExitCode())
		})
	}
}

func TestOutput(t *testing.T) {
	out, err := Output(context.Background(), sh("echo out; echo err >&2; exit 8"))
	assert.Equal(t, "out\n", string(out))
	var ee *ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 8, ee.ExitCode())
	assert.Equal(t, "err\n", string(ee.Stderr))

	out, err = CombinedOutput(context.Background(), sh("echo 1; echo 2 >&2; echo 3"))
	require.NoError(t, err)
	assert.Equal(t, "1\n2\n3\n", string(out))

	cmd := sh("cat")
	cmd.Stdin = strings.NewReader("from stdin\n")
	out, err = Output(context.Background(), cmd)
	require.NoError(t, err)
	assert.Equal(t, "from stdin\n", string(out))
}

// TestRunTool: an exit code is a result, not an error; a signal, or a
// tool that cannot start, is an error.
func TestRunTool(t *testing.T) {
	out, code, err := RunTool(context.Background(), sh("echo fixed; echo it >&2; exit 1"))
	require.NoError(t, err)
	assert.Equal(t, 1, code)
	assert.Equal(t, "fixed\nit\n", string(out))

	_, code, err = RunTool(context.Background(), sh("true"))
	require.NoError(t, err)
	assert.Zero(t, code)

	_, code, err = RunTool(context.Background(), sh("kill -9 $$"))
	require.Error(t, err, "death by a signal")
	assert.Equal(t, -1, code)

	_, code, err = RunTool(context.Background(), exec.Command(filepath.Join(t.TempDir(), "missing")))
	require.Error(t, err)
	assert.Equal(t, -1, code)
}

func TestRunContextKills(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Run(ctx, exec.Command("sleep", "30"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "signal: killed")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestStartErrors(t *testing.T) {
	_, err := Start(exec.CommandContext(context.Background(), "true"))
	assert.ErrorContains(t, err, "exec.CommandContext")

	_, err = Start(exec.Command(filepath.Join(t.TempDir(), "missing")))
	assert.ErrorIs(t, err, os.ErrNotExist)

	cmd := exec.Command("true")
	p, err := Start(cmd)
	require.NoError(t, err)
	require.NoError(t, p.Wait())
	_, err = Start(cmd)
	assert.ErrorContains(t, err, "already started")
	assert.ErrorIs(t, p.Signal(syscall.SIGTERM), os.ErrProcessDone)
}

// TestConcurrentStatuses starts many children at once, each exiting with
// its own code, so exit statuses must be routed by pid, not by arrival.
func TestConcurrentStatuses(t *testing.T) {
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = Run(context.Background(), sh("exit $1", strconv.Itoa(i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i == 0 {
			assert.NoError(t, err)
			continue
		}
		var ee *ExitError
		if assert.ErrorAs(t, err, &ee, "child %d", i) {
			assert.Equal(t, i, ee.ExitCode(), "child %d", i)
		}
	}
}

// TestReapsOrphan: a child leaves a grandchild behind and exits; the
// grandchild reparents to this process (a subreaper, like PID 1) and must
// not stay a zombie once it exits.
func TestReapsOrphan(t *testing.T) {
	out, err := Output(context.Background(), sh("sleep 0.1 & echo $!"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(t, err)
	waitFor(t, 10*time.Second, fmt.Sprintf("orphan %d to be reaped", pid), func() bool {
		orphans.Lock()
		defer orphans.Unlock()
		_, ok := orphans.m[pid]
		return ok
	})
	orphans.Lock()
	st := orphans.m[pid]
	orphans.Unlock()
	assert.True(t, st.Success(), "orphan status %s", st)
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	assert.ErrorIs(t, err, os.ErrNotExist, "orphan %d still in /proc (zombie?)", pid)
}
