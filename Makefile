# sluice — developer entry points. `make demo` runs the main job, `make test`
# runs every test; both start the services they need (deploy/dev/services.sh).
SHELL := /bin/bash
export SLUICE_STATE ?= $(HOME)/.local/state/sluice
export SLUICE_TOOLS ?= $(HOME)/.cache/sluice/bin
GO ?= go

.PHONY: demo demo-stop demo-clean bench-apply bench-capture test unit build services stop-services worker stop-worker lint bench bench-full fuzz soak image image-test

build:
	$(GO) build -o bin/sluice ./starter
	$(GO) build -o bin/sluice-worker ./worker

services:
	bash deploy/dev/services.sh

stop-services: stop-worker
	bash deploy/dev/stop-services.sh

worker: build services
	bash deploy/dev/worker.sh

stop-worker:
	bash deploy/dev/worker.sh stop

demo: worker
	bash deploy/dev/demo.sh

demo-stop: build
	bash deploy/dev/demo.sh stop

demo-clean: build
	bash deploy/dev/demo.sh clean

test: services
	bash deploy/dev/test.sh $(ARGS)

# The cross-engine matrix, large: every source × target kill test with ten
# times CI's workload and kills (about an hour here).
soak: services image-test
	source $(SLUICE_STATE)/services.env && SLUICE_SOAK_SCALE=10 SLUICE_REQUIRE_SERVICES=1 \
		$(GO) test -count=1 -timeout 120m -v -run 'SurvivesWorkerKills' ./integration/

unit:
	$(GO) test -short ./...

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

bench: bench-full bench-capture bench-apply

bench-full: build services
	bash deploy/dev/worker.sh
	bash bench/full-backup.sh
	bash bench/full-backup-mariadb.sh

bench-capture: build services
	bash deploy/dev/worker.sh
	bash bench/capture.sh
	bash bench/capture-mariadb.sh

bench-apply: build services
	bash deploy/dev/worker.sh
	bash bench/apply.sh

# Every fuzzer of the chain's readers of stored objects (docs/chain-format.md
# §6.5), one after another for FUZZTIME each: 13 × 20 s, under five minutes.
FUZZTIME ?= 20s
FUZZERS = FuzzDecodeChunk FuzzScanTuples FuzzDecodeChangeChunk FuzzDecodeCommit \
	FuzzLoadCheckpoint FuzzLoadCheckpointPage FuzzLoadLegacyCatalog FuzzGetManifest \
	FuzzGetSealedManifest FuzzGetLayout FuzzReadChunkRef FuzzControlObjects FuzzReadEnvelope

fuzz:
	set -e; for f in $(FUZZERS); do \
		$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./internal/chain/; \
	done

# The container image, built without a container daemon (docs/deploy.md): both
# binaries with cgo (pg_query_go) linked statically, assembled on an empty base
# by deploy/image into an OCI layout (bin/sluice-image) and a docker-load
# tarball (bin/sluice-image.tar). Takes minutes on a cold build cache.
IMAGE_GOFLAGS = -buildvcs=true -tags netgo,osusergo,timetzdata \
	-ldflags '-s -w -linkmode external -extldflags "-static"'

image:
	mkdir -p bin/image
	# One go build for both, so both record the same commit.
	CGO_ENABLED=1 $(GO) build $(IMAGE_GOFLAGS) -o bin/image/ ./starter ./worker
	mv bin/image/starter bin/image/sluice
	mv bin/image/worker bin/image/sluice-worker
	$(GO) run ./deploy/image -sluice bin/image/sluice -worker bin/image/sluice-worker \
		-layout bin/sluice-image -tar bin/sluice-image.tar

# Unpack the built image and run both binaries' version commands from it.
image-test: image
	SLUICE_IMAGE=$(CURDIR)/bin/sluice-image $(GO) test -count=1 -run TestBuiltImage -v ./deploy/image/
