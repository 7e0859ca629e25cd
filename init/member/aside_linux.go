package member

import "syscall"

// freeBytes returns the bytes of path's filesystem available to
// unprivileged users (statfs f_bavail).
func freeBytes(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
