package power

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// wdev is a watchdog character device driven with the WDIOC ioctls of
// linux/watchdog.h.
type wdev struct {
	f        *os.File
	options  uint32 // WDIOF_* from WDIOC_GETSUPPORT; 0 when unknown
	identity string // from WDIOC_GETSUPPORT; "" when unknown
}

// openDevice opens the watchdog, which starts it.
func openDevice(path string) (device, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	d := &wdev{f: f}
	if info, err := unix.IoctlGetWatchdogInfo(d.fd()); err == nil {
		d.options = info.Options
		d.identity = string(bytes.TrimRight(info.Identity[:], "\x00"))
	}
	return d, nil
}

func (d *wdev) fd() int { return int(d.f.Fd()) }

func (d *wdev) SetTimeout(want time.Duration) (time.Duration, error) {
	secs := int((want + time.Second - 1) / time.Second)
	err := unix.IoctlSetPointerInt(d.fd(), unix.WDIOC_SETTIMEOUT, secs)
	if err != nil {
		err = fmt.Errorf("WDIOC_SETTIMEOUT: %w", err)
	}
	got, gerr := unix.IoctlGetInt(d.fd(), unix.WDIOC_GETTIMEOUT)
	switch {
	case gerr != nil && err == nil:
		return 0, fmt.Errorf("WDIOC_GETTIMEOUT: %w", gerr)
	case gerr != nil || got <= 0:
		return 0, err
	}
	return time.Duration(got) * time.Second, err
}

// Keepalive feeds with WDIOC_KEEPALIVE, or with a write for drivers
// without the ioctl. The write is never 'V', which would arm magic close.
func (d *wdev) Keepalive() error {
	if err := unix.IoctlWatchdogKeepalive(d.fd()); err == nil {
		return nil
	}
	_, err := d.f.Write([]byte{0})
	return err
}

func (d *wdev) Identity() string { return d.identity }

func (d *wdev) MagicClose() bool { return d.options&unix.WDIOF_MAGICCLOSE != 0 }

func (d *wdev) Disarm() error {
	_, werr := d.f.Write([]byte("V"))
	return errors.Join(werr, d.f.Close())
}
