#!/usr/bin/env bash
# cluster.sh boots a local three-node cluster in run/cluster (make cluster
# builds bin/ and out/etcdbox.img first); `etcdbox cluster up` prints how
# to use it. Extra arguments go to up, e.g. --nodes 5 --memory 768.
# After `bin/etcdbox cluster down --dir run/cluster`, running it again
# resumes the same cluster on its disks.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
dir=run/cluster
args=(--nodes 3)
if [ -f out/etcdbox.img ]; then
	args+=(--image out/etcdbox.img)
fi
if [ -f "$dir/state.json" ]; then
	args=() # resume: its nodes, on the image its disks were made from
fi
exec bin/etcdbox cluster up --dir "$dir" ${args[@]+"${args[@]}"} "$@"
