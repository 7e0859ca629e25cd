//go:build !linux

package netconf

import (
	"context"
	"errors"
)

// A Lease is a DHCP lease, which Renew extends.
type Lease struct{}

var errNotLinux = errors.New("DHCP: raw sockets of Linux only")

// DHCP is Linux's only.
func DHCP(context.Context, string, string) (Plan, *Lease, error) { return Plan{}, nil, errNotLinux }

// Renew is Linux's only.
func Renew(context.Context, string, *Lease) (Plan, *Lease, error) { return Plan{}, nil, errNotLinux }
