#!/usr/bin/env bash
# image.sh builds out/etcdbox.img with the defaults.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
mkdir -p out
bin/etcdbox build -o out/etcdbox.img "$@"
