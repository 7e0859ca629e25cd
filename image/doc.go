// Package image builds the bootable images of etcdbox nodes, rootless and
// reproducibly: no mounts, loop devices or mkfs, and the same inputs with
// the same SOURCE_DATE_EPOCH give the same bytes.
//
// A build assembles one root filesystem (init, etcd, e2fsprogs and fsck.fat with their
// shared libraries, the kernel modules of a driver set, /etc) and writes
// it as a zstd-compressed newc initramfs (see Compression). FormatRaw puts that initramfs,
// the kernel and systemd-boot on a FAT32 ESP in a GPT disk with an empty
// DATA placeholder (DESIGN §3); FormatOCI writes the same root plus
// /boot/vmlinuz and /boot/initrd as a two-layer OCI image (root, then boot).
//
//	epoch, err := image.EpochFromEnv()
//	...
//	res, err := image.Build(ctx, image.Config{
//		Kernel:          "/boot/vmlinuz-6.1.0-57-amd64",
//		Modules:         "/lib/modules/6.1.0-57-amd64",
//		Etcd:            "bin/etcd",
//		Init:            "bin/init",
//		Bootloader:      image.BootloaderPath("/"),
//		Output:          "out/etcdbox.img",
//		SourceDateEpoch: epoch,
//	})
//
// The init reads what the builder writes, but must not link this package
// (a test in cmd/etcdbox checks), so the layout is shared as a contract,
// not as code.
package image
