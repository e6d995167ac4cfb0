# Stowage: one Makefile for every module in go.work.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/stowage-csi/stowage/shared/version.Version=$(VERSION)
# Every module listed in go.work, as a folder name.
MODULES := $(shell go work edit -json | sed -n 's/.*"DiskPath": "\.\/\(.*\)".*/\1/p')
GO_TEST_FLAGS ?=
# e2e tests start real control planes, loop devices and FUSE mounts; two packages at a time fit 2 cores.
E2E_PARALLEL ?= 2

.PHONY: all build test test-unit test-fuzz test-e2e test-deploy test-report lint bench clean demo images chaos conformance

all: build

build:
	@mkdir -p bin
	@for m in $(MODULES); do \
		if [ -d $$m/cmd ]; then \
			echo "build $$m"; \
			(cd $$m && CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o ../bin/ ./cmd/...); \
		fi; \
	done

# Every phase of every module runs even after another failed, each recording its result under RESULTS; the
# report at the end names each phase that failed or did not run, and fails the whole run if any did.
RESULTS ?= $(CURDIR)/.cache/test-results
# record NAME COMMAND: runs COMMAND, writes pass/fail for NAME, and carries on.
record = if ( $(2) ); then echo pass > "$(RESULTS)/$(1)"; else echo fail > "$(RESULTS)/$(1)"; echo "FAILED: $(1)"; fi
# The phases `make test` must run, in order.
PHASES = $(foreach m,$(MODULES),unit-$(m)) fuzz deploy $(foreach m,$(MODULES),e2e-$(m))

test:
	@rm -rf "$(RESULTS)" && mkdir -p "$(RESULTS)"
	@$(MAKE) --no-print-directory -k test-unit test-fuzz test-deploy test-e2e || true
	@$(MAKE) --no-print-directory test-report

test-report:
	@bad=""; \
	for p in $(PHASES); do \
		r=$$(cat "$(RESULTS)/$$p" 2>/dev/null || echo "did not run"); \
		echo "phase $$p: $$r"; \
		[ "$$r" = pass ] || bad="$$bad $$p ($$r)"; \
	done; \
	if [ -n "$$bad" ]; then echo "make test: FAILED:$$bad"; exit 1; fi; \
	echo "make test: every phase passed"

# Unit tests run with the race detector: the batchers, uploaders and controllers are concurrent by design.
test-unit:
	@mkdir -p "$(RESULTS)"; failed=0; \
	for m in $(MODULES); do \
		echo "unit $$m"; \
		$(call record,unit-$$m,cd $$m && go test -race -count=1 -timeout 20m $(GO_TEST_FLAGS) ./...); \
		[ "$$(cat "$(RESULTS)/unit-$$m")" = pass ] || failed=1; \
	done; \
	exit $$failed

# Every fuzz target runs briefly beyond its seed corpus (the seeds already run in test-unit). The budget is a
# count, not a duration: Go 1.26's fuzz coordinator can fail a duration run with a spurious "context deadline
# exceeded" at the deadline (golang/go#75804, fixed in Go 1.27); a count has no deadline to race. A failing
# target does not stop the others.
FUZZ_TIME ?= 20000x
test-fuzz:
	@mkdir -p "$(RESULTS)"; failed=0; \
	for m in $(MODULES); do \
		for f in $$(cd $$m && grep -rl --include='*_test.go' '^func Fuzz' . || true); do \
			d=$$(dirname $$f); \
			for n in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$m/$$f); do \
				echo "fuzz $$m/$$d $$n"; \
				(cd $$m && go test -run '^$$' -fuzz "^$$n\$$" -fuzztime $(FUZZ_TIME) $$d) || { failed=1; echo "FAILED: fuzz $$m/$$d $$n"; }; \
			done; \
		done; \
	done; \
	if [ $$failed = 0 ]; then echo pass > "$(RESULTS)/fuzz"; else echo fail > "$(RESULTS)/fuzz"; fi; \
	exit $$failed

# deploy/ checked without a builder or a cluster: the images' Dockerfile and build context, and every kustomize
# combination and Helm chart rendered and validated (deploy/deploycheck). A module of its own, outside go.work and
# built with GOWORK=off, because helm.sh/helm/v3 needs newer k8s.io modules than the workspace's.
test-deploy:
	@mkdir -p "$(RESULTS)"; echo "deploy deploy/deploycheck"; \
	$(call record,deploy,cd deploy/deploycheck && GOWORK=off go vet ./... && GOWORK=off go test -count=1 -timeout 20m $(GO_TEST_FLAGS) ./...); \
	[ "$$(cat "$(RESULTS)/deploy")" = pass ]

# End-to-end tests carry the e2e build tag and are named TestE2E*.
test-e2e:
	@mkdir -p "$(RESULTS)"; failed=0; \
	for m in $(MODULES); do \
		echo "e2e $$m"; \
		$(call record,e2e-$$m,cd $$m && go test -count=1 -tags e2e -run '^TestE2E' -p $(E2E_PARALLEL) -timeout 40m $(GO_TEST_FLAGS) ./...); \
		[ "$$(cat "$(RESULTS)/e2e-$$m")" = pass ] || failed=1; \
	done; \
	exit $$failed

# staticcheck is built from its module at a pinned version into the tool cache, like the control plane.
STATICCHECK_VERSION := v0.8.2
TOOLS_DIR := $(or $(STOWAGE_CACHE_DIR),$(CURDIR)/.cache)/bin/staticcheck-$(STATICCHECK_VERSION)
STATICCHECK := $(TOOLS_DIR)/staticcheck

$(STATICCHECK):
	GOBIN=$(TOOLS_DIR) GOWORK=off go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK)
	@bad=$$(gofmt -l $(MODULES) e2e/tools deploy/deploycheck 2>/dev/null || true); \
	if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	@echo "repocheck"; cd tools && go run ./repocheck -root ..
	@for m in $(MODULES); do \
		echo "vet $$m"; \
		(cd $$m && go vet ./... && go vet -tags e2e,bench ./... && $(STATICCHECK) -tags e2e,bench ./...); \
	done

# Benchmarks carry the bench build tag, are named TestBench*, and print their tables; never part of `make test`.
bench:
	@for m in $(MODULES); do \
		echo "bench $$m"; \
		(cd $$m && go test -count=1 -tags bench -run '^TestBench' -v -timeout 60m ./... | grep -v '^=== RUN\|^--- PASS\|^PASS\|^ok ') || exit 1; \
	done

# The EBS chaos test at scale, never part of `make test` (which runs its short form): CHAOS_LIFECYCLES volume
# lifecycles with VolumeSnapshots (through snapshot-controller and csi-snapshotter), in waves that fit the nodes'
# attach limits, under steady EC2 faults (Describe calls included, slow attaches) and a SIGKILL of a random Stowage
# process every 20 s; it ends with the leak checks and a table. STOWAGE_CHAOS_SEED replays a run (kills and
# the emulator's faults); STOWAGE_CHAOS_PER_NODE and STOWAGE_CHAOS_KILL_EVERY change the wave size and the kill
# interval.
CHAOS_LIFECYCLES ?= 200
chaos:
	cd e2e && STOWAGE_CHAOS_LIFECYCLES=$(CHAOS_LIFECYCLES) go test -count=1 -tags e2e -run '^TestE2EEBSChaos$$' -v -timeout 90m ./ebsstack/

# Kubernetes' External Storage suite (e2e.test at the rig's pin), the whole focus for ebs.csi.aws.com, against the
# stowage-ebs chart on two real nodes in two zones (e2e/conformance); never part of `make test`, which runs its
# short form. Each run has two passes, as Kubernetes' CI runs the suite: the specs that may share the cluster in
# CONFORMANCE_PROCS processes of Ginkgo's command line, then the [Serial] and [Disruptive] ones in one. It runs
# twice: with Stowage's sidecars, then with upstream's csi-attacher, csi-provisioner, csi-snapshotter and
# snapshot-controller in their place (STOWAGE_CONFORMANCE_SIDECARS=upstream; the resizer stays Stowage's, having
# no upstream build here), and fails if either does. Each prints the table of passed, failed and skipped per test
# pattern and suite, and keeps the JUnit reports, e2e.test's logs and the table in
# $STOWAGE_CACHE_DIR/conformance/full and full-upstream.
CONFORMANCE_PROCS ?= 3
CONFORMANCE_RUN = go test -count=1 -tags e2e -run '^TestE2EConformance$$' -v -timeout 3h ./conformance/
conformance:
	cd e2e && export STOWAGE_CONFORMANCE=full STOWAGE_CONFORMANCE_PROCS=$(CONFORMANCE_PROCS); \
		$(CONFORMANCE_RUN); stowage=$$?; \
		STOWAGE_CONFORMANCE_SIDECARS=upstream $(CONFORMANCE_RUN); upstream=$$?; \
		[ $$stowage -eq 0 ] && [ $$upstream -eq 0 ]

# The EBS storage stack on this machine (control plane, emulated EC2, Stowage binaries, simulated kubelets),
# walking volumes through their life. Needs root. DEMO_FLAGS=--keep leaves it running until Ctrl-C.
DEMO_FLAGS ?=
demo:
	cd e2e && go run ./cmd/devcluster demo $(DEMO_FLAGS)

# One image per line of deploy/images/images.tsv (image, module), each a --target of deploy/images/Dockerfile,
# with the first container builder found that can build (docker with a daemon, podman, buildah). Without one
# it says so and succeeds: deploy/deploycheck checks the Dockerfile and its build context in `make test`.
IMAGE_REGISTRY ?= stowage
IMAGE_TAG ?= $(VERSION)
images:
	@builder=""; \
	if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then builder="docker build"; \
	elif command -v podman >/dev/null 2>&1; then builder="podman build"; \
	elif command -v buildah >/dev/null 2>&1; then builder="buildah bud"; fi; \
	if [ -z "$$builder" ]; then echo "images: no container builder (docker daemon, podman or buildah); skipped"; exit 0; fi; \
	grep -v '^#' deploy/images/images.tsv | while read -r image module; do \
		echo "image $(IMAGE_REGISTRY)/$$image:$(IMAGE_TAG) ($$module)"; \
		$$builder -f deploy/images/Dockerfile --target "$$image" --build-arg MODULE="$$module" \
			--build-arg VERSION="$(VERSION)" -t "$(IMAGE_REGISTRY)/$$image:$(IMAGE_TAG)" \
			-t "$(IMAGE_REGISTRY)/$$image:latest" . || exit 1; \
	done

clean:
	rm -rf bin
