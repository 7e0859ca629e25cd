#!/usr/bin/env bash
# fuzz.sh runs every fuzz target (func Fuzz* in a _test.go file) for
# FUZZTIME each: `make test` runs it with 3s, `make fuzz` with 2m by
# default. A crash fails the run, and go test writes the input under the
# package's testdata/fuzz/<Target>/: commit it, so that every later run
# replays it as a regression test.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=-buildvcs=false
fuzztime=${FUZZTIME:-3s}
# FUZZWORKERS: fuzzing processes per target (go test -parallel); go's
# default is one per core. make test runs one, beside the unit tests.
workers=${FUZZWORKERS:-$(nproc)}
out=/tmp/etcdbox-fuzz.$$
trap 'rm -f "$out"' EXIT
fuzz() { go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" -parallel "$workers" "$1" >"$out" 2>&1; }
# coordinatorRace says whether a failed run is Go 1.26's fuzz coordinator
# failing the target as -fuzztime ends while a worker is busy
# (golang/go#75804, fixed in Go 1.27): a bare "context deadline exceeded"
# and no failing input written. A crash, a failed seed or a hang always
# writes an input or another message, so only this is run once more.
coordinatorRace() {
	grep -qx '    context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"
}
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./\.' | xargs -n1 dirname | sort -u); do
	for target in $(go test -list '^Fuzz' "$dir" | grep '^Fuzz'); do
		echo "fuzz: $dir $target ($fuzztime)"
		fuzz "$dir" "$target" && continue
		if coordinatorRace; then
			echo "fuzz: $dir $target: the fuzz coordinator's deadline race (golang/go#75804), no input written; once more"
			fuzz "$dir" "$target" && continue
		fi
		cat "$out"
		exit 1
	done
done
