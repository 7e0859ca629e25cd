#!/usr/bin/env bash
# bench_build.sh prints the build figures of issue 2: the median time of
# five raw builds from the prebuilt binaries in bin/, the raw image's
# apparent and allocated size, and the initrd size compressed and
# uncompressed, the kernel and /init sizes. Printed, not asserted; with
# $BENCH_JSON_DIR (hack/bench.sh) also recorded as the section "build" of
# bench.json. Needs `make build` and hack/deps.sh.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

sysroot=${ETCDBOX_CACHE:-.cache}/sysroot
out=$(mktemp -d "${TMPDIR:-/tmp}/etcdbox-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
img=$out/etcdbox.img

echo "== etcdbox build (raw, and each other format in the same rounds)"
GOFLAGS=-buildvcs=false go run ./image/internal/benchbuild \
	-n "${BENCH_RUNS:-5}" -o "$img" -sysroot "$sysroot" -init bin/init \
	-formats "${BENCH_FORMATS-qcow2,vhd,gce,vmdk,oci}" | tee "$out/benchbuild.txt"
apparent=$(stat -c %s "$img")
allocated=$(du -B1 "$img" | cut -f1)
printf 'raw image apparent:  %d bytes (%d MiB)\n' "$apparent" $((apparent >> 20))
printf 'raw image allocated: %d bytes (%d MiB)\n' "$allocated" $((allocated >> 20))
kernel=$(find "$sysroot/boot" -name 'vmlinuz-*' | sort -V | tail -n 1)
kbytes=$(stat -c %s "$kernel")
ibytes=$(stat -c %s bin/init)
ebytes=$(stat -c %s bin/etcd)
printf 'kernel:              %d bytes (%s)\n' "$kbytes" "$(basename "$kernel")"
printf '/init binary:        %d bytes (it carries etcd; upstream etcd alone, stripped: %d bytes)\n' "$ibytes" "$ebytes"

# What /init and upstream etcd are made of, module by module (issue 17):
# bench/binsize needs the symbol table, so both are built again unstripped.
GOFLAGS=-buildvcs=false go build -o "$out/binsize" ./bench/binsize
for what in init:./init etcd:go.etcd.io/etcd/server/v3; do
	GOOS=linux GOARCH=amd64 CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
		go build -trimpath -o "$out/${what%%:*}.unstripped" "${what#*:}"
done
echo "== /init by module (top 15)"
"$out/binsize" -n 15 "$out/init.unstripped"
echo "== etcd by module (top 15)"
"$out/binsize" -n 15 "$out/etcd.unstripped"
# /init links etcd (init/runetcd.go): what it has beyond etcd is the init.
echo "== /init beyond etcd, by module (top 15)"
"$out/binsize" -n 15 -minus "$out/etcd.unstripped" "$out/init.unstripped"

[ -n "${BENCH_JSON_DIR:-}" ] || exit 0
# The figures above, for bench.json (bench/figures record).
GOFLAGS=-buildvcs=false go build -o "$out/figures" ./bench/figures
rec() { "$out/figures" record -section build "$@"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }
# "build time (raw, median of 5): 3.35s (min ...": the median and n.
read -r n median < <(sed -n 's/^build time (raw, median of \([0-9]*\)): \([0-9.]*\)s.*/\1 \2/p' "$out/benchbuild.txt")
# "build time (raw, cold cache): 16.10s; cold / built-in encoder (--zstd none, median of 5, 2.01s) 8.01x"
read -r cold builtinn builtinmedian < <(sed -n 's/^build time (raw, cold cache): \([0-9.]*\)s; .*median of \([0-9]*\), \([0-9.]*\)s.*/\1 \2 \3/p' "$out/benchbuild.txt")
builtininitrd=$(sed -n 's/^initrd compressed (--zstd none): *\([0-9]*\) bytes.*/\1/p' "$out/benchbuild.txt")
initrd=$(sed -n 's/^initrd compressed: *\([0-9]*\) bytes.*/\1/p' "$out/benchbuild.txt")
read -r fastn fastmedian < <(sed -n 's/^build time (raw, --compression fast, median of \([0-9]*\)): \([0-9.]*\)s.*/\1 \2/p' "$out/benchbuild.txt")
fastinitrd=$(sed -n 's/^initrd compressed (--compression fast): *\([0-9]*\) bytes.*/\1/p' "$out/benchbuild.txt")
unpacked=$(sed -n 's/^initrd uncompressed: *\([0-9]*\) bytes.*/\1/p' "$out/benchbuild.txt")
rec -key build.time -name "image build from prebuilt binaries (raw, initrd members from the cache)" -value "$median" -unit s -n "$n" -goal "<= 2 s" \
	-ref "the same with --compression fast" -refvalue "$fastmedian"
rec -key build.time-cold -name "image build from prebuilt binaries (raw, cold cache: the zstd program compresses)" -value "$cold" -unit s -goal "<= 2 s" \
	-ref "the built-in encoder's best (--zstd none), median of $builtinn" -refvalue "$builtinmedian"
rec -key build.time-fast -name "image build from prebuilt binaries (raw, --compression fast)" -value "$fastmedian" -unit s -n "$fastn" -goal "<= 2 s"
rec -key build.boot-size -name "kernel + initrd" -value "$(mib $((kbytes + initrd)))" -unit MiB -goal "<= 20 MiB"
rec -key build.initrd -name "initrd, compressed (the zstd program, level 19)" -value "$(mib "$initrd")" -unit MiB \
	-ref "the built-in encoder's best (--zstd none)" -refvalue "$(mib "$builtininitrd")"
rec -key build.initrd-builtin -name "initrd, compressed (--zstd none: the built-in encoder's best)" -value "$(mib "$builtininitrd")" -unit MiB \
	-ref "the initrd uncompressed" -refvalue "$(mib "$unpacked")"
rec -key build.initrd-fast -name "initrd, compressed (--compression fast)" -value "$(mib "$fastinitrd")" -unit MiB \
	-ref "the initrd uncompressed" -refvalue "$(mib "$unpacked")"
rec -key build.initrd-uncompressed -name "initrd, uncompressed" -value "$(mib "$unpacked")" -unit MiB -goal "as small as the parts allow"
rec -key build.init-binary -name "/init binary, which carries etcd" -value "$(mib "$ibytes")" -unit MiB -goal "drop what the init does not use" \
	-ref "upstream etcd alone, stripped" -refvalue "$(mib "$ebytes")"
rec -key build.raw-allocated -name "raw image, allocated" -value "$(mib "$allocated")" -unit MiB \
	-ref "its apparent size" -refvalue "$(mib "$apparent")"
