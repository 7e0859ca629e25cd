//go:build !linux

package metadata

import (
	"context"
	"errors"
)

// Link brings up a NIC for the metadata services: only on Linux.
func Link(context.Context) (func(), error) { return nil, errors.New("only on Linux") }
