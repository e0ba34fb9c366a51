# Berth — make help lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
BUILDTAGS := containers_image_openpgp,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper
# -trimpath: compiled packages do not depend on where the checkout lies, so a fresh clone (CI's)
# reuses the build cache of earlier ones instead of compiling every package of the repository again.
export GOFLAGS := -buildvcs=false -trimpath -tags=$(BUILDTAGS)
MODULES   := shared uploads engine contracts e2e
BIN       := $(CURDIR)/bin
STATE     := $(CURDIR)/.berth

# Berth's version and commit, linked into both binaries (shared/buildinfo).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/berth-project/berth/shared/buildinfo.version=$(VERSION) -X github.com/berth-project/berth/shared/buildinfo.commit=$(COMMIT)

ENGINE_LISTEN  ?= tcp://127.0.0.1:8080
UPLOADS_LISTEN ?= tcp://127.0.0.1:8081

.PHONY: help
help: ## List the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_-]+:.*## /{printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build berth-engine and berth-uploads into bin/
	@mkdir -p $(BIN)
	cd engine && CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/berth-engine ./cmd/berth-engine
	cd uploads && CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/berth-uploads ./cmd/berth-uploads

.PHONY: run
run: runtime-deps build ## Build both services and run them on loopback, state under ./.berth/ (Ctrl-C stops both)
	@hack/run.sh "$(BIN)" "$(STATE)" "$(ENGINE_LISTEN)" "$(UPLOADS_LISTEN)"

.PHONY: runtime-deps
runtime-deps: ## Install the Debian packages the engine needs at run time (runc, conmon, netavark ...)
	@hack/deps.sh runtime

.PHONY: deps
deps: ## Install everything the tests need (apt packages, libpact_ffi)
	@hack/deps.sh test

.PHONY: test
test: deps ## Install what the tests need, then run every test (unit, PostgreSQL, engine, contracts, e2e)
	@hack/test.sh all

.PHONY: test-unit
test-unit: ## Run the Go tests of shared, uploads and engine (starts a throwaway PostgreSQL; no docker)
	@hack/test.sh unit

.PHONY: test-hosts
test-hosts: deps ## Run the host suite in a Debian 12 VM (systemd, cgroup v2) under qemu; the image is built once and cached
	@hack/hostlab.sh run

.PHONY: bench-hosts
bench-hosts: deps ## Benchmark the engine against Podman 4.3.1 in the host lab's VM (cycle and stats; prints BENCH lines)
	@hack/hostlab.sh bench

.PHONY: checks
checks: ## gofmt, go vet, go mod tidy, promtool rules and rule tests, deploy/ manifest and dashboard checks
	@hack/test.sh checks

.PHONY: contracts
contracts: ## Run only the Pact consumer tests and the provider verification
	@hack/test.sh contracts

.PHONY: e2e
e2e: ## Run only the testcontainers e2e tests (starts dockerd, builds images)
	@hack/test.sh e2e

.PHONY: bench
bench: deps build ## Run the benchmarks against the reference peers (dd, Podman 4.3.1) and print ratios
	@hack/bench.sh

.PHONY: soak
soak: ## Run the bounded soak (<= 10 min: 3,000 execs, 500 log reads, 200 container cycles, 100 image list readers; RSS, fds, zombies, mounts, cgroups before and after), the chaos loop (CHAOSTIME, default 3m: mixed workload incl. checkpoint/restore, --userns=auto and the Docker API, random kill -9s, ledger and leak checks) and the restart-to-ready figures
	criu=$${BERTH_ENGINE_CRIU:-$$(hack/criu.sh 2>/dev/null | tail -n1)}; if [ -x "$$criu" ]; then export BERTH_ENGINE_CRIU=$$criu; fi; cd engine && BERTH_SOAK=1 BERTH_CHAOS=$${CHAOSTIME:-3m} BERTH_RESTART_BENCH=1 $(GO) test -count=1 -run '^(TestSoak|TestChaos|TestRestartToReady)$$' -timeout 30m -v ./internal/backend/lifecycle/containers/

.PHONY: soak-uploads
soak-uploads: ## Run the bounded (~3 min) uploads soak: 3 replicas on one PostgreSQL, 30 clients, kill -9 of replicas and PostgreSQL; checks every per-upload invariant and PUT/GET p99
	cd uploads && BERTH_SOAK_UPLOADS=1 $(GO) test -count=1 -run '^TestSoakReplicas$$' -timeout 10m -v ./internal/soak/

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 20s) each
	@hack/fuzz.sh $${FUZZTIME:-20s}

.PHONY: images
images: build ## Build the service container images (local Debian base via debootstrap, no registry needed)
	@hack/images.sh

.PHONY: install
install: build ## Install binaries to /usr/local/bin and the engine swagger to /usr/share/containers/berth
	install -D -m 0755 $(BIN)/berth-engine /usr/local/bin/berth-engine
	install -D -m 0755 $(BIN)/berth-uploads /usr/local/bin/berth-uploads
	install -D -m 0644 engine/api/swagger.yaml /usr/share/containers/berth/swagger.yaml

.PHONY: lint
lint: ## gofmt, go vet and go mod tidy checks on every module
	@hack/lint.sh

.PHONY: tidy
tidy: ## go mod tidy every module
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy) || exit 1; done

.PHONY: clean
clean: ## Remove build output and local state
	rm -rf $(BIN) $(STATE)
