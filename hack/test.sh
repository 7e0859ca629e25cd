#!/usr/bin/env bash
# test.sh runs every test: unit and integration packages first, then the
# QEMU end-to-end tier on its own, since its VMs want both cores.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=-buildvcs=false
unformatted=$(gofmt -l $(git ls-files '*.go' ; git ls-files --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed: $unformatted" >&2
	exit 1
fi
go vet ./...
pkgs=$(go list ./... | grep -v '/e2e$')
# -parallel 4: the container tiers (init) wait on etcd far more than they
# compute, so four at a time fit two cores; -p 4 for the same reason
# across packages (init alone takes four minutes, mostly waiting).
go test -count=1 -timeout 20m -p 4 -parallel 4 $pkgs
# Every fuzz target for a few seconds: a regression replays its committed
# crash input in the run above; this looks for new ones (make fuzz: longer).
FUZZTIME=${FUZZTIME:-3s} hack/fuzz.sh
if [ -d e2e ]; then
	# -parallel 2: the one-VM tests run two at a time, after the cluster
	# tests (which run alone); see e2e/schedule_test.go.
	go test -count=1 -timeout 80m -parallel 2 -v ./e2e
fi
