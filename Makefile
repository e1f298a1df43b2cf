# sluice — developer entry points. `make demo` runs the main job, `make test`
# runs every test; both start the services they need (deploy/dev/services.sh).
SHELL := /bin/bash
export SLUICE_STATE ?= $(HOME)/.local/state/sluice
export SLUICE_TOOLS ?= $(HOME)/.cache/sluice/bin
GO ?= go

.PHONY: demo demo-stop demo-clean bench-apply bench-capture test unit build services stop-services worker stop-worker lint bench bench-full fuzz soak image image-test image-push

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

# The fault matrix, large: every source × target kill test, every fault
# test (store, target, source, Temporal) and the MariaDB failovers, with ten
# times CI's workload and faults, ending with a
# table of each fault class (deploy/dev/soak.sh; hours here), then the image
# check.
soak: services image-test
	bash deploy/dev/soak.sh

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
# binaries with cgo (pg_query_go) linked statically, for every platform in
# IMAGE_PLATFORMS (cross-compiled with Debian's cross toolchain, which
# deploy/image/build.sh installs when missing), assembled on an empty base by
# deploy/image into an OCI image index in the OCI layout bin/sluice-image, and
# the build host's platform's image into a docker-load tarball
# (bin/sluice-image.tar). Takes minutes per platform on a cold build cache.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64

image:
	GO=$(GO) bash deploy/image/build.sh bin/image $(IMAGE_PLATFORMS)
	$(GO) run ./deploy/image -binaries bin/image -platforms '$(IMAGE_PLATFORMS)' \
		-layout bin/sluice-image -tar bin/sluice-image.tar

# Check the built image: every platform's manifest and binaries, the host's
# unpacked and run (`version`), and a push to an in-process registry on
# loopback, pulled back and run again.
image-test: image
	SLUICE_IMAGE=$(CURDIR)/bin/sluice-image SLUICE_IMAGE_PLATFORMS='$(IMAGE_PLATFORMS)' \
		$(GO) test -count=1 -run TestBuiltImage -v ./deploy/image/

# Push the image index to a registry: make image-push IMAGE=registry.example.com/sluice:TAG.
# Credentials come from the docker config (or podman's auth.json) and its
# credential helpers: docker login / podman login first; nothing takes a secret.
image-push:
	@test -n '$(IMAGE)' || { echo 'make image-push: name the image: make image-push IMAGE=registry.example.com/sluice:TAG' >&2; exit 2; }
	$(MAKE) image
	$(GO) run ./deploy/image push -layout bin/sluice-image '$(IMAGE)'
