package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// setHostname sets the kernel's hostname.
func setHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("set hostname %s: %w", name, err)
	}
	return nil
}
