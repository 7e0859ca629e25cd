//go:build !linux

package power

import "errors"

func openDevice(string) (device, error) {
	return nil, errors.New("watchdog needs Linux")
}
