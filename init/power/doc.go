// Package power holds PID 1's hooks into the machine: the hardware
// watchdog, the ACPI power button, and the last steps of a shutdown.
//
// A clean shutdown runs in this order, so that etcd's WAL is closed before
// its filesystem goes and the watchdog cannot fire half way:
//
//	stop etcd (supervise.Supervisor.Stop: SIGTERM, then SIGKILL)
//	power.Unmount(mounts, log)     // sync, unmount in reverse, sync
//	log "etcdbox: shutdown complete"; flush the console
//	watchdog.Close()               // disarm, or keep feeding when it cannot be
//	power.Halt(power.PowerOff)     // sync, reboot(2); returns only on error
package power
