#!/usr/bin/env bash
# etcd-version.sh VERSION builds upstream etcd VERSION (e.g. 3.6.16) into
# bin/etcd-VERSION from a scratch module in the cache, the same way
# build.sh builds the pinned one: `go install` refuses the server module
# because of its replace directives. Tests of upgrades across etcd minors
# use it. It does nothing when the binary is there and newer than this
# script.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: etcd-version.sh VERSION}
out=bin/etcd-$version
[ -x "$out" ] && [ "$out" -nt "$0" ] && exit 0
scratch=${ETCDBOX_CACHE:-.cache}/etcd-$version
mkdir -p "$scratch" bin
if [ ! -f "$scratch/go.mod" ]; then
	printf 'module scratch\n\ngo 1.26\n' > "$scratch/go.mod"
fi
(cd "$scratch" && GOFLAGS=-buildvcs=false go get "go.etcd.io/etcd/server/v3@v$version" >/dev/null 2>&1)
(cd "$scratch" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$OLDPWD/$out" go.etcd.io/etcd/server/v3)
echo "built $out"
