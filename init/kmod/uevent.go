package kmod

import (
	"bytes"
	"path"
	"strings"
)

// DeviceEvents tells Coldplug of the devices the kernel adds, so that it
// does not rescan sysfs after each round of loads to find the devices a
// driver made appear. KernelEvents is the real source.
//
// Why: under software emulation one scan of sysfs costs 125-165 ms (a
// readlink and a read of uevent for each of some 250 devices), and a
// coldplug needs two rescans after the first scan: one to find the
// virtio devices virtio_pci creates, one to see that nothing more came.
// The kernel announces each device it adds on its uevent socket anyway,
// at the moment it adds it: a driver's probe runs inside finit_module(2),
// so by the time a load returns, the devices it made are announced.
type DeviceEvents interface {
	// Added returns the devices with a modalias the kernel added since
	// the last call (or since the source opened), without waiting.
	// lost reports that the kernel dropped some (the socket's buffer
	// ran full): the caller must rescan sysfs.
	Added() (devs []Device, lost bool, err error)
	Close() error
}

// Device is a device the kernel announced: its directory under sysfs
// and its modalias.
type Device struct {
	Dir, Modalias string
}

// parseUevent reads one message of the kernel's uevent socket,
// "ACTION@DEVPATH\0KEY=VALUE\0...", and returns the device of an "add"
// that carries a MODALIAS, with Dir its DEVPATH (relative to sysfs).
// Anything else (another action, no modalias, a DEVPATH that is not a
// clean path under /devices, or a message not in the kernel's form, such
// as udev's, which start "libudev\0") is not a device to load for.
func parseUevent(msg []byte) (Device, bool) {
	head, rest, ok := bytes.Cut(msg, []byte{0})
	if !ok || !bytes.Contains(head, []byte("@")) {
		return Device{}, false
	}
	var action, devpath, modalias string
	for kv := range bytes.SplitSeq(rest, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			continue
		}
		switch string(k) {
		case "ACTION":
			action = string(v)
		case "DEVPATH":
			devpath = string(v)
		case "MODALIAS":
			modalias = string(v)
		}
	}
	if action != "add" || modalias == "" || strings.ContainsAny(modalias, "\n") ||
		!strings.HasPrefix(devpath, "/devices/") || path.Clean(devpath) != devpath {
		return Device{}, false
	}
	return Device{Dir: devpath, Modalias: modalias}, true
}
