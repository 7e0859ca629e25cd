//go:build !linux

package main

// getrandom is Linux's only.
func getrandom(bool) error { return errNotLinux }
