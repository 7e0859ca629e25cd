package power

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestHalt(t *testing.T) {
	var calls []string
	defer func(s func(), r func(int) error) { syncFS, reboot = s, r }(syncFS, reboot)
	syncFS = func() { calls = append(calls, "sync") }
	var rebootErr error
	reboot = func(cmd int) error {
		switch cmd {
		case unix.LINUX_REBOOT_CMD_POWER_OFF:
			calls = append(calls, "power off")
		case unix.LINUX_REBOOT_CMD_RESTART:
			calls = append(calls, "restart")
		default:
			calls = append(calls, "other")
		}
		return rebootErr
	}
	tests := []struct {
		name    string
		action  Action
		err     error
		want    []string
		wantErr string
	}{
		{"power off", PowerOff, nil, []string{"sync", "power off"}, ""},
		{"reboot", Reboot, nil, []string{"sync", "restart"}, ""},
		{"refused", PowerOff, unix.EPERM, []string{"sync", "power off"}, "power off: operation not permitted"},
		{"unknown action", Action(7), nil, nil, "halt: unknown action 7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, rebootErr = nil, tt.err
			err := Halt(tt.action)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tt.want, calls)
		})
	}
}

// inMountNamespace runs f on a thread with a private mount namespace, so
// the test's mounts are invisible to the host and die with the thread.
func inMountNamespace(t *testing.T, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	// Not a skip: `make test` runs as root (CI too), and a skip would
	// hide a failure there.
	err := <-errc
	require.NoError(t, err, "a private mount namespace needs root (CAP_SYS_ADMIN)")
}

// mounted lists the thread's mountpoints under dir.
func mounted(dir string) ([]string, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mps []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			mps = append(mps, fields[4])
		}
	}
	return mps, s.Err()
}

func TestUnmount(t *testing.T) {
	dir := t.TempDir()
	var logged []string
	logf := func(format string, args ...any) { logged = append(logged, format) }
	var errNested, errBusy error
	var afterNested, afterBusy []string
	inMountNamespace(t, func() error {
		a, b, busy, never := filepath.Join(dir, "a"), filepath.Join(dir, "a", "b"), filepath.Join(dir, "busy"), filepath.Join(dir, "never")
		for _, d := range []string{a, busy, never} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
		}
		for _, mp := range []string{a, b, busy} {
			if mp == b {
				if err := os.Mkdir(b, 0o755); err != nil {
					return err
				}
			}
			if err := unix.Mount("tmpfs", mp, "tmpfs", 0, ""); err != nil {
				return err
			}
		}
		// Nested mounts, listed in mount order: b must go before a.
		errNested = Unmount([]string{a, b, never}, logf)
		var err error
		if afterNested, err = mounted(dir); err != nil {
			return err
		}
		// A file open for writing keeps busy busy.
		f, err := os.Create(filepath.Join(busy, "wal"))
		if err != nil {
			return err
		}
		defer f.Close()
		errBusy = Unmount([]string{busy}, logf)
		afterBusy, err = mounted(dir)
		return err
	})
	assert.NoError(t, errNested)
	assert.Equal(t, []string{filepath.Join(dir, "busy")}, afterNested)
	require.Error(t, errBusy)
	assert.Contains(t, errBusy.Error(), "device or resource busy (detached)")
	assert.Contains(t, errBusy.Error(), "remount "+filepath.Join(dir, "busy")+" read-only: device or resource busy")
	assert.Empty(t, afterBusy, "busy mount still attached")
	assert.Equal(t, []string{"unmount %s: %v; remounting read-only and detaching"}, logged)
}
