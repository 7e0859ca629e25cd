#!/usr/bin/env bash
# chaos.sh is `make chaos`: randomised faults on one local 3-node cluster
# under the porcupine writer (e2e/chaos_test.go), for ETCDBOX_CHAOS
# (default 30m). ETCDBOX_CHAOS_SEED=<n> replays a run; each run logs its
# seed; ETCDBOX_CHAOS_FAULTS=a,b draws only the faults named so, and
# ETCDBOX_CHAOS_ROLL_FAULTS=a,b only those during the roll rounds. Not part
# of `make test`.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=-buildvcs=false
export ETCDBOX_CHAOS=${ETCDBOX_CHAOS:-30m}
# Each round has its own deadline (10 min); the test stops drawing rounds
# once ETCDBOX_CHAOS is over, so go test's own limit is only a backstop.
go test -count=1 -timeout 24h -v -run '^TestChaos$' ./e2e
