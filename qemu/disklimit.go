package qemu

import (
	"context"
	"fmt"
)

// The node's own disk: the -drive id of its block backend and the id of
// the guest device on it (config.go). QMP names the disk by the QOM path
// of the virtio-blk device inside the PCI device: the PCI device itself
// has no block backend (the "device" argument, the backend's name, is
// deprecated).
const (
	diskDrive  = "disk0"
	diskDevice = "vdisk0"
	diskQOM    = "/machine/peripheral/" + diskDevice + "/virtio-backend"
)

// DiskLimit limits the I/O of a VM's disk, as QEMU's throttling does
// (block_set_io_throttle): requests beyond it wait in QEMU, so the guest
// sees a slow disk, as on a throttled cloud volume or a failing drive. A
// zero field is no limit; the zero DiskLimit is full speed.
type DiskLimit struct {
	// IOPS is read and write requests per second, together.
	IOPS int64 `json:"iops,omitempty"`
	// BPS is bytes per second, read and written together.
	BPS int64 `json:"bps,omitempty"`
}

// Zero reports whether l limits nothing.
func (l DiskLimit) Zero() bool { return l == DiskLimit{} }

// String is "20 iops, 1048576 B/s", or "none".
func (l DiskLimit) String() string {
	switch {
	case l.Zero():
		return "none"
	case l.BPS == 0:
		return fmt.Sprintf("%d iops", l.IOPS)
	case l.IOPS == 0:
		return fmt.Sprintf("%d B/s", l.BPS)
	}
	return fmt.Sprintf("%d iops, %d B/s", l.IOPS, l.BPS)
}

// Check refuses a negative field.
func (l DiskLimit) Check() error {
	if l.IOPS < 0 || l.BPS < 0 {
		return fmt.Errorf("disk limit %d iops, %d B/s: negative", l.IOPS, l.BPS)
	}
	return nil
}

// LimitDisk sets the limit of the VM's disk; the zero DiskLimit lifts it.
// Requests already waiting are let go at the new rate.
func (v *VM) LimitDisk(ctx context.Context, l DiskLimit) error {
	if err := l.Check(); err != nil {
		return fmt.Errorf("vm %s: %w", v.name, err)
	}
	// QEMU takes every rate, zero for none; per-direction rates stay off.
	args := map[string]any{
		"id": diskQOM, "iops": l.IOPS, "bps": l.BPS,
		"iops_rd": 0, "iops_wr": 0, "bps_rd": 0, "bps_wr": 0,
	}
	return v.executeArgs(ctx, "block_set_io_throttle", args, nil)
}

// DiskLimit reads the limit of the VM's disk back from QEMU.
func (v *VM) DiskLimit(ctx context.Context) (DiskLimit, error) {
	var blocks []struct {
		Device   string `json:"device"`
		Inserted *struct {
			IOPS int64 `json:"iops"`
			BPS  int64 `json:"bps"`
		} `json:"inserted"`
	}
	if err := v.executeArgs(ctx, "query-block", nil, &blocks); err != nil {
		return DiskLimit{}, err
	}
	for _, b := range blocks {
		if b.Device == diskDrive && b.Inserted != nil {
			return DiskLimit{IOPS: b.Inserted.IOPS, BPS: b.Inserted.BPS}, nil
		}
	}
	return DiskLimit{}, fmt.Errorf("vm %s: query-block: no drive %s with a medium", v.name, diskDrive)
}
