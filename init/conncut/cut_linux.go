package conncut

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Cut shuts down (shutdown(2), both directions) each of conns in process
// pid, as List found them, and returns how many it shut down. It takes a
// copy of each descriptor with pidfd_getfd(2) (Linux 5.6; the caller
// needs ptrace access to pid, as PID 1 or a parent has) and checks that
// the copy is the same socket, by inode, before it acts: a descriptor
// closed and reused since List is skipped. The process sees its peer's
// end of each connection close, as after a network failure. A connection
// that is gone already is not an error.
func Cut(pid int, conns []Conn) (int, error) {
	if len(conns) == 0 {
		return 0, nil
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return 0, fmt.Errorf("cut connections of pid %d: pidfd_open: %w", pid, err)
	}
	defer unix.Close(pidfd)
	var errs []error
	n := 0
	for _, c := range conns {
		fd, err := unix.PidfdGetfd(pidfd, c.FD, 0)
		if errors.Is(err, unix.EBADF) {
			continue // closed since List
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cut %s of pid %d: pidfd_getfd: %w", c, pid, err))
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Ino != c.Inode {
			unix.Close(fd)
			continue // another file now
		}
		err = unix.Shutdown(fd, unix.SHUT_RDWR)
		unix.Close(fd)
		if errors.Is(err, unix.ENOTCONN) {
			continue // ended meanwhile
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cut %s of pid %d: shutdown: %w", c, pid, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
