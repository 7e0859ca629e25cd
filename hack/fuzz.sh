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
for dir in $(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./\.' | xargs -n1 dirname | sort -u); do
	for target in $(go test -list '^Fuzz' "$dir" | grep '^Fuzz'); do
		echo "fuzz: $dir $target ($fuzztime)"
		go test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -parallel "$workers" "$dir" >/tmp/etcdbox-fuzz.$$ 2>&1 || {
			cat /tmp/etcdbox-fuzz.$$
			rm -f /tmp/etcdbox-fuzz.$$
			exit 1
		}
	done
done
rm -f /tmp/etcdbox-fuzz.$$
