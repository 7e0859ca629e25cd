#!/usr/bin/env bash
# build.sh writes bin/etcdbox (the CLI), bin/init (static, linux/amd64),
# bin/init-testhooks (for e2e tests), bin/etcd and bin/etcdctl (upstream, from the modules pinned in go.mod),
# and bin/etcd-$(cat hack/etcd-previous) (the previous minor, from a scratch module).
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
mkdir -p bin
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
go build -trimpath -ldflags="-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/etcdbox ./cmd/etcdbox
GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o bin/init ./init
# Test images only: the same init with test hooks (see init/testhooks.go).
GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -tags testhooks -o bin/init-testhooks ./init
# The upstream binaries change only with go.mod and this script; go
# build's cache makes a rebuild cheap, but skip it outright when they are
# newer than both. Stripped (-s -w): the symbol table and DWARF are a
# third of etcd's 35.7 MB, and the image carries it in every initrd.
# The build information (debug/buildinfo, etcd's version) stays.
for tool in etcd:go.etcd.io/etcd/server/v3 etcdctl:go.etcd.io/etcd/etcdctl/v3; do
	name=${tool%%:*} pkg=${tool#*:}
	if [ ! -x "bin/$name" ] || [ go.sum -nt "bin/$name" ] || [ hack/build.sh -nt "bin/$name" ]; then
		GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o "bin/$name" "$pkg"
	fi
done
# The previous etcd minor, for the e2e roll across minors (3.6 -> 3.7 -> 3.6).
hack/etcd-version.sh "$(cat hack/etcd-previous)"
