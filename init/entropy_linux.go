package main

import (
	"errors"

	"golang.org/x/sys/unix"
)

// getrandom reads one byte from the kernel's pool; with block false it
// fails with EAGAIN while the pool is not ready.
func getrandom(block bool) error {
	var b [1]byte
	flags := 0
	if !block {
		flags = unix.GRND_NONBLOCK
	}
	for {
		_, err := unix.Getrandom(b[:], flags)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
