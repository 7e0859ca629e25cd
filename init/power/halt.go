package power

// Action is what Halt does to the machine.
type Action int

const (
	// PowerOff turns the machine off (ACPI S5; QEMU exits).
	PowerOff Action = iota
	// Reboot restarts it.
	Reboot
)

func (a Action) String() string {
	switch a {
	case PowerOff:
		return "power off"
	case Reboot:
		return "reboot"
	}
	return "unknown action"
}
