#!/usr/bin/env bash
# deps.sh installs what etcdbox's builds and tests need on a fresh Debian
# machine, and does nothing when everything is already there.
#
# Host tools (QEMU, cpio, dosfstools, e2fsprogs, iproute2, iptables) come
# through apt.
# The guest's parts (the Debian kernel and its modules, OVMF, systemd-boot)
# are fetched with `apt-get download` and unpacked with `dpkg-deb -x` into a
# cache folder: installing linux-image-amd64 would build an initrd we never
# use, which takes minutes.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${ETCDBOX_CACHE:-$root/.cache}
debs=$cache/debs
sysroot=$cache/sysroot

sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

updated=
apt_update() {
	if [ -z "$updated" ]; then
		sudo_ apt-get update -qq
		updated=1
	fi
}

# Host packages, by the command each provides.
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-img >/dev/null || need+=(qemu-utils)
command -v cpio >/dev/null || need+=(cpio)
command -v fsck.vfat >/dev/null || [ -x /usr/sbin/fsck.vfat ] || need+=(dosfstools)
[ -x /usr/sbin/mke2fs ] || need+=(e2fsprogs)
command -v ip >/dev/null || [ -x /usr/sbin/ip ] || need+=(iproute2)
command -v zstd >/dev/null || need+=(zstd)
# kvwriter's test cuts a member off its clients by dropping its port.
command -v iptables >/dev/null || [ -x /usr/sbin/iptables ] || need+=(iptables)
command -v depmod >/dev/null || [ -x /usr/sbin/depmod ] || need+=(kmod)
# The container form's test runs the OCI image with podman, on runc: crun
# refuses the hybrid cgroup layout some of these machines have.
command -v podman >/dev/null || need+=(podman)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || need+=(runc)
if [ ${#need[@]} -gt 0 ]; then
	apt_update
	echo "deps: apt-get install ${need[*]}"
	sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Guest packages, unpacked into $sysroot. A stamp per package records the
# version unpacked, so a second run does nothing.
mkdir -p "$debs" "$sysroot"
fetch() { # fetch PACKAGE
	local pkg=$1
	if [ -e "$sysroot/.stamp-$pkg" ]; then return; fi
	apt_update
	(cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "$pkg")
	local deb
	deb=$(ls -t "$debs"/"${pkg}"_*.deb | head -n1)
	echo "deps: unpack $(basename "$deb")"
	dpkg-deb -x "$deb" "$sysroot"
	touch "$sysroot/.stamp-$pkg"
}

# linux-image-amd64 is a metapackage: resolve the versioned image it names.
if ! ls "$sysroot"/boot/vmlinuz-* >/dev/null 2>&1; then
	apt_update
	kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	[ -n "$kpkg" ] || { echo "deps: cannot resolve the kernel package of linux-image-amd64" >&2; exit 1; }
	fetch "$kpkg"
fi
# The package ships no modules.dep or modules.alias (its postinst runs
# depmod); make them, since the builder and the init read them.
for kdir in "$sysroot"/lib/modules/*; do
	kver=$(basename "$kdir")
	if [ ! -s "$kdir/modules.dep" ]; then
		echo "deps: depmod $kver"
		PATH=$PATH:/usr/sbin:/sbin depmod -b "$sysroot" "$kver"
	fi
done
fetch ovmf
fetch systemd-boot-efi

echo "deps: ok (cache $cache)"
