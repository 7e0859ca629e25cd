//go:build !linux

package netconf

import (
	"errors"

	"github.com/vishvananda/netlink"
)

var errNoNetlink = errors.New("netlink: Linux only")

// Open is Linux's only.
func Open() (*netlink.Handle, error) { return nil, errNoNetlink }

// Apply is Linux's only.
func Apply(*netlink.Handle, Plan) error { return errNoNetlink }
