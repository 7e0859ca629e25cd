# etcdbox: entry points only; the logic lives in hack/*.sh.
export GOFLAGS := -buildvcs=false
GO ?= go

.PHONY: all deps build image test test-short bench chaos fuzz cluster clean docs

all: build

deps:
	hack/deps.sh

build:
	hack/build.sh

image: build
	hack/image.sh

test: deps build
	hack/test.sh

test-short: build
	$(GO) test -short ./...

bench: deps build
	hack/bench.sh

chaos: deps build
	hack/chaos.sh

fuzz:
	FUZZTIME=$${FUZZTIME:-2m} hack/fuzz.sh

cluster: deps build image
	hack/cluster.sh

# The flag reference (docs/cli) and man pages (docs/man), generated from
# the commands; TestDocsFresh fails in make test when they are stale.
docs:
	ETCDBOX_UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestDocsFresh$$' ./cmd/etcdbox

clean:
	rm -rf bin out
