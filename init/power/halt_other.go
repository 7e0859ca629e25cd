//go:build !linux

package power

import "errors"

var errNotLinux = errors.New("power: needs Linux")

// Halt is not supported off Linux.
func Halt(Action) error { return errNotLinux }

// Unmount is not supported off Linux.
func Unmount([]string, func(string, ...any)) error { return errNotLinux }

// LoadKexec is not supported off Linux.
func LoadKexec(string, string, string) error { return errNotLinux }
