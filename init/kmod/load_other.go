//go:build !linux

package kmod

import "errors"

var errNotLinux = errors.New("kernel modules are only supported on Linux")

// InsertModule is only implemented on Linux.
func InsertModule(path, params string) error { return errNotLinux }

// DefaultDir is only implemented on Linux.
func DefaultDir() (string, error) { return "", errNotLinux }

// KernelEvents is only implemented on Linux.
func KernelEvents(sysDir string) (DeviceEvents, error) { return nil, errNotLinux }
