#!/usr/bin/env bash
# bench_build.sh prints the build figures of issue 2: the median time of
# five raw builds from the prebuilt binaries in bin/, the raw image's
# apparent and allocated size, and the initrd size compressed and
# uncompressed. Printed, not asserted. Needs `make build` and hack/deps.sh.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

sysroot=${ETCDBOX_CACHE:-.cache}/sysroot
out=$(mktemp -d "${TMPDIR:-/tmp}/etcdbox-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
img=$out/etcdbox.img

echo "== etcdbox build (raw, and each other format in the same rounds)"
GOFLAGS=-buildvcs=false go run ./image/internal/benchbuild \
	-n "${BENCH_RUNS:-5}" -o "$img" -sysroot "$sysroot" -etcd bin/etcd -init bin/init \
	-formats "${BENCH_FORMATS-qcow2,vhd,gce,vmdk,oci}"
apparent=$(stat -c %s "$img")
allocated=$(du -B1 "$img" | cut -f1)
printf 'raw image apparent:  %d bytes (%d MiB)\n' "$apparent" $((apparent >> 20))
printf 'raw image allocated: %d bytes (%d MiB)\n' "$allocated" $((allocated >> 20))
