// Package qemu runs etcdbox images in QEMU virtual machines: the harness
// behind `etcdbox cluster` and the end-to-end tests.
//
// A VM is a work directory plus a QEMU process. The directory holds the
// machine's state, so starting the same directory again is powering the
// same machine on again (its disk and UEFI variables are kept):
//
//	Dir/disk.qcow2     copy-on-write overlay over Config.Image (or disk.raw, a sparse copy)
//	Dir/OVMF_VARS.fd   this machine's UEFI variable store, copied from Config.OVMFVars
//	Dir/console.log    the serial console of the current run (the previous run's is console.log.1)
//	Dir/qemu.log       QEMU's own stdout and stderr
//	Dir/qemu.pid       the QEMU process id, written (and locked) by QEMU
//	Dir/qmp.sock       the QMP control socket
//
// Usage:
//
//	vm, err := qemu.Start(ctx, qemu.Config{
//		Name: "n1", Dir: dir, Image: "out/etcdbox.img", Overlay: true,
//		OVMFCode: code, OVMFVars: vars,
//		Forwards: []qemu.Forward{{GuestPort: 2379}},
//	})
//	mark := vm.Mark()
//	_, err = vm.WaitConsole(ctx, mark, "etcdbox: etcd ready")
//	port := vm.HostPort(2379) // a free loopback port picked at Start
//	err = vm.Stop(ctx, time.Minute) // ACPI power button, then quit, then kill
//
// QEMU runs in its own session with its standard streams detached, so it
// outlives the process that started it; Attach finds it again from its
// directory. The package waits on console marker lines and QMP answers,
// never on sleeps.
//
// Networking: every VM has one virtio NIC on QEMU's user-mode network with
// restrict=on, so the guest reaches nothing outside the host process, and
// host loopback ports forwarded to guest ports. A multi-node network (a
// switch the VMs share, with DHCP and DNS) is a later NIC mode; NetMode is
// the seam for it.
package qemu
