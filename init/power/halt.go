package power

// Action is what Halt does to the machine.
type Action int

const (
	// PowerOff turns the machine off (ACPI S5; QEMU exits).
	PowerOff Action = iota
	// Reboot restarts it through the firmware.
	Reboot
	// Kexec jumps into the kernel LoadKexec loaded, without the
	// firmware (LINUX_REBOOT_CMD_KEXEC).
	Kexec
)

func (a Action) String() string {
	switch a {
	case PowerOff:
		return "power off"
	case Reboot:
		return "reboot"
	case Kexec:
		return "kexec"
	}
	return "unknown action"
}
