//go:build !linux

package storage

import (
	"errors"
	"os"
)

var errNotLinux = errors.New("block devices are only supported on Linux")

func blockGeometry(f *os.File) (sectorSize, size int64, err error) { return 0, 0, errNotLinux }

// ResizePartition is only implemented on Linux.
func ResizePartition(disk *os.File, num int, start, length int64) error { return errNotLinux }

// Mount is only implemented on Linux.
func Mount(dev, target, fstype, options string) error { return errNotLinux }
