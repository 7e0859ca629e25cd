//go:build !linux

package flash

import (
	"errors"
	"os"
)

var errNotLinux = errors.New("flashing a block device needs Linux")

func notInUse(string, Options) error         { return errNotLinux }
func openExclusive(string) (*os.File, error) { return nil, errNotLinux }
func dropCache(*os.File) error               { return errNotLinux }
func rereadPartitions(*os.File)              {}
