#!/usr/bin/env bash
# bench.sh prints the figures of `make bench`, one section per issue.
# Figures are printed, never asserted: the machine is noisy, so each
# section compares variants side by side in one run and reports ratios.
# Needs `make deps build`. Knobs (environment):
#   BENCH_RUNS   builds timed by the build section (default 5)
#   BENCH_FORMATS formats built beside raw in each round (default qcow2,vhd,gce,vmdk,oci)
#   BENCH_BOOTS  boots per image in the boot section (default 3)
#   BENCH_BAD    bad images of the upgrade section (default panic,nomod)
#   BENCH_ONLY   space-separated sections to run (default: build boot cluster upgrade verify backup throughput)
#   BENCH_OUT    directory of bench.json and roll.svg (default: the repository root)
#   BENCH_README 1: regenerate README.md's figures table from bench.json at the end
# A new section is a function here plus, for Go, a program under bench/.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=-buildvcs=false

sysroot=${ETCDBOX_CACHE:-.cache}/sysroot
out=$(mktemp -d "${TMPDIR:-/tmp}/etcdbox-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
# Each section records its figures into $BENCH_JSON_DIR
# (bench/internal/figures); the end merges them into bench.json.
benchout=${BENCH_OUT:-.}
mkdir -p "$benchout"
export BENCH_JSON_DIR=$out/figures
mkdir -p "$BENCH_JSON_DIR"
# The upgrade section draws its roll's timeline there (bench/upgrade -svg).
export BENCH_SVG=$benchout/roll.svg

# Issue 2: build time, image and initrd sizes.
section_build() {
	hack/bench_build.sh
}

# Issue 3: boot to healthy, ours against the floor image, and init's rss.
section_boot() {
	echo "== boot to healthy (QEMU start -> linearizable read), ours (mTLS) vs floor (plain http), and ours without the cloud metadata probe (nometa)"
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "$out/floorinit" ./bench/floorinit
	go build -o "$out/bench-boot" ./bench/boot
	"$out/bench-boot" -n "${BENCH_BOOTS:-3}" -sysroot "$sysroot" \
		-etcd bin/etcd -init bin/init -floor-init "$out/floorinit" -work "$out/boot"
}

# Issues 4, 10 and 13: cluster up of three nodes against one, cluster add,
# faults, and a restore and a quorum-loss recovery against a reboot.
section_cluster() {
	echo "== local clusters on the closed virtual network (QEMU start -> voting members)"
	bin/etcdbox build -o "$out/cluster.img" >/dev/null
	go run ./bench/cluster -image "$out/cluster.img" -sysroot "$sysroot" -etcdbox bin/etcdbox
}

# Issue 5: a rolling upgrade of three nodes (total, per node, longest write
# gap) against one node's plain reboot, and a bad slot's way back.
section_upgrade() {
	echo "== rolling upgrade of 3 nodes vs a plain reboot, and from a bad slot's boot back to the old slot"
	go build -o "$out/bench-upgrade" ./bench/upgrade
	"$out/bench-upgrade" -sysroot "$sysroot" -init bin/init \
		-bad "${BENCH_BAD-panic,nomod}" -work "$out/upgrade"
}

# Issue 11: what checking an upgrade image (digests and signature) costs,
# as a share of the staging.
section_verify() {
	echo "== verifying an upgrade image (digests + signature) as a share of its staging"
	bin/etcdbox build -o "$out/verify.img" >/dev/null
	bin/etcdbox build --format oci -o "$out/verify.tar" >/dev/null
	go run ./bench/verify -oci "$out/verify.tar" -image "$out/verify.img"
}

# Issue 13: what a scheduled backup costs: snapshot and verification time,
# size, and the write latency p99 while snapshots run.
section_backup() {
	echo "== a backup: snapshot, verification, and the writes' p99 while it runs"
	go run ./bench/backup -etcd bin/etcd
}

# Issue 17: etcd's put throughput and p50/p99 at 1, 16 and 256 clients and
# linearizable range reads through a 3-node etcdbox cluster, against 3
# floor VMs (same kernel and etcd, bench/floorinit, plain http, ext4 on
# the same virtio disk) and 3 floor VMs whose etcd speaks mutual TLS as
# ours does, one after the other; etcdctl check perf on each.
section_throughput() {
	echo "== etcd throughput and latency through the appliance (3 nodes, mTLS) vs 3 floor VMs (plain http) and 3 floor VMs (mTLS)"
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "$out/floorinit" ./bench/floorinit
	go build -o "$out/bench-throughput" ./bench/throughput
	"$out/bench-throughput" -sysroot "$sysroot" -etcd bin/etcd -init bin/init -etcdctl bin/etcdctl \
		-floor-init "$out/floorinit" -work "$out/throughput"
}

start=$(date +%s)
# A section that fails is named, and the others still run and are
# recorded: the run then ends non-zero after the merge.
failed=""
for s in ${BENCH_ONLY:-build boot cluster upgrade verify backup throughput}; do
	"section_$s" || { failed="$failed $s"; echo "== section $s failed" >&2; }
done
echo "== bench done in $(($(date +%s) - start))s${failed:+; failed:$failed}"

# bench.json: this run's sections replace the old file's of the same name,
# under the run's date, commit and machine; BENCH_README=1 regenerates the
# README's figures table from it.
go run ./bench/figures merge -o "$benchout/bench.json" \
	-commit "$(git describe --always --dirty 2>/dev/null || echo unknown)" \
	-command "${BENCH_ONLY:+BENCH_ONLY=\"$BENCH_ONLY\" }hack/bench.sh"
if [ "${BENCH_README:-}" = 1 ]; then
	go run ./bench/figures readme "$benchout/bench.json" README.md
fi
if [ -n "$failed" ]; then
	exit 1
fi
