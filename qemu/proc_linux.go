package qemu

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// detached makes QEMU the leader of a new session: no terminal signal
// (Ctrl-C in the shell that ran `etcdbox cluster up`) reaches it.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may
	// itself hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// processDir returns pid's working directory, or "".
func processDir(pid int) string {
	d, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return ""
	}
	return d
}

// dialUnix connects to a unix socket, also when path is longer than the
// 108 bytes a socket address holds: then through /proc/self/fd/N/<base>,
// N an O_PATH descriptor of its directory.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	if len(path) < 100 {
		return d.DialContext(ctx, "unix", path)
	}
	dir, err := os.OpenFile(filepath.Dir(path), unix.O_PATH|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, fmt.Errorf("open socket directory: %w", err)
	}
	defer dir.Close()
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(int(dir.Fd()))+"/"+filepath.Base(path))
}
