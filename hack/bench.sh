#!/usr/bin/env bash
# bench.sh prints the figures of `make bench`, one section per issue.
# Figures are printed, never asserted: the machine is noisy, so each
# section compares variants side by side in one run and reports ratios.
# Needs `make deps build`. Knobs (environment):
#   BENCH_RUNS   builds timed by the build section (default 5)
#   BENCH_BOOTS  boots per image in the boot section (default 3)
#   BENCH_ONLY   space-separated sections to run (default: build boot cluster)
# A new section is a function here plus, for Go, a program under bench/.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=-buildvcs=false

sysroot=${ETCDBOX_CACHE:-.cache}/sysroot
out=$(mktemp -d "${TMPDIR:-/tmp}/etcdbox-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT

# Issue 2: build time, image and initrd sizes.
section_build() {
	hack/bench_build.sh
}

# Issue 3: boot to healthy, ours against the floor image, and init's rss.
section_boot() {
	echo "== boot to healthy (QEMU start -> linearizable read), ours (mTLS) vs floor (plain http)"
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "$out/floorinit" ./bench/floorinit
	go build -o "$out/bench-boot" ./bench/boot
	"$out/bench-boot" -n "${BENCH_BOOTS:-3}" -sysroot "$sysroot" \
		-etcd bin/etcd -init bin/init -floor-init "$out/floorinit" -work "$out/boot"
}

# Issue 4: cluster up of three nodes against one, and cluster add.
section_cluster() {
	echo "== local clusters on the closed virtual network (QEMU start -> voting members)"
	bin/etcdbox build -o "$out/cluster.img" >/dev/null
	go run ./bench/cluster -image "$out/cluster.img" -sysroot "$sysroot"
}

start=$(date +%s)
for s in ${BENCH_ONLY:-build boot cluster}; do
	"section_$s"
done
echo "== bench done in $(($(date +%s) - start))s"
