#!/usr/bin/env bash
# test.sh runs every test: unit and integration packages first, then the
# QEMU end-to-end tier on its own, since its VMs want both cores.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
# The same build settings as build.sh's binaries (no cgo, -trimpath), so
# that vet and the test binaries reuse the packages that build compiled:
# on a cold cache that is one compile of etcd's tree and the rest fewer
# (go vet took 181 s cold with the defaults, 64 s with these).
export GOFLAGS="-buildvcs=false -trimpath" CGO_ENABLED=0
unformatted=$(gofmt -l $(git ls-files '*.go' ; git ls-files --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt needed: $unformatted" >&2
	exit 1
fi
go vet ./...
# Every package builds and vets on another OS too (STYLE §6): what is
# Linux's lives in _linux.go files, with _other.go stubs that fail.
GOOS=darwin go vet ./...
pkgs=$(go list ./... | grep -v '/e2e$')
# -parallel 6: the container tiers (init) wait on etcd far more than they
# compute (its tests used 0.7 of a core at four at a time), so six at a
# time fit two cores; -p 4 for the same reason across packages (init
# alone takes three to five minutes, mostly waiting).
# Every fuzz target for a few seconds, alongside the unit tests: a
# regression replays its committed crash input in the unit run; this looks
# for new ones (make fuzz: longer). The unit run keeps the machine about
# two-thirds busy, so the fuzzers' minute fits beside it.
fuzzlog=$(mktemp)
FUZZTIME=${FUZZTIME:-3s} FUZZWORKERS=1 hack/fuzz.sh >"$fuzzlog" 2>&1 &
fuzzpid=$!
unit=0
go test -count=1 -timeout 20m -p 4 -parallel 6 $pkgs || unit=$?
fuzz=0
wait "$fuzzpid" || fuzz=$?
cat "$fuzzlog"
rm -f "$fuzzlog"
if [ "$unit" != 0 ] || [ "$fuzz" != 0 ]; then
	echo "test: unit tests exit $unit, fuzz exit $fuzz" >&2
	exit 1
fi
if [ -d e2e ]; then
	# The one-VM tests run in two lanes after the cluster tests (which
	# run alone); -parallel lets them all past t.Parallel, and the lanes
	# decide (e2e/schedule_test.go).
	# A failed cluster test prints its nodes' console tails at cleanup,
	# after its assertions; so that the end of the output, which is what
	# a CI excerpt shows, names what failed, a failed run ends with every
	# failure line and assertion again.
	e2elog=$(mktemp)
	e2e=0
	go test -count=1 -timeout 80m -parallel 8 -v ./e2e 2>&1 | tee "$e2elog" || e2e=$?
	if [ "$e2e" != 0 ]; then
		echo "=== e2e failed; its failures and assertions again:"
		grep -E -A7 '^\s*(--- FAIL|[a-z_]+_test\.go:[0-9]+: *$|Error Trace:)|panic:' "$e2elog" | grep -v '^\s*{"level"' | head -200
	fi
	rm -f "$e2elog"
	exit "$e2e"
fi
