//go:build !linux

package member

import "errors"

// freeBytes is statfs(2), which etcdbox uses on Linux only: elsewhere
// Move refuses, since it cannot tell whether the copy fits.
func freeBytes(string) (uint64, error) {
	return 0, errors.New("free space: statfs is implemented on Linux only")
}
