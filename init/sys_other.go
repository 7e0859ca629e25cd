//go:build !linux

package main

import (
	"context"
	"errors"
)

// The init is Linux's: elsewhere it builds and vets, and its kernel-facing
// steps fail (container mode skips them).
var errNotLinux = errors.New("only on Linux")

func (n *node) mountPseudo(context.Context) error { return errNotLinux }

func setHostname(string) error { return errNotLinux }

func mountReadOnly(string, string, string) error { return errNotLinux }

func unmount(string) {}
