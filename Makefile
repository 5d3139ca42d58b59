# Gantry's build, test and verification entry points. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/gantry-dev/gantry/internal/version.Version=$(VERSION) \
           -X github.com/gantry-dev/gantry/internal/version.Commit=$(COMMIT)
# Integration tests find the control plane here unless KUBEBUILDER_ASSETS is set.
K8S_BINS = $(shell hack/k8s-bins.sh --print)
# The simulator's conformance test finds GitHub's schemas here unless GANTRY_OCTOKIT_DIR is set.
OCTOKIT_DIR = $(shell hack/octokit-schemas.sh --print)
# How long each fuzz target runs in `make fuzz`.
FUZZTIME ?= 10s

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/gantry
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/gantry ./cmd/gantry

.PHONY: generate
generate: ## Regenerate deepcopy code, CRDs and RBAC from the API types and markers
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(TOOLS) controller-gen crd:maxDescLen=0 paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(TOOLS) controller-gen rbac:roleName=gantry-manager paths=./internal/controller/... output:rbac:artifacts:config=config/rbac

.PHONY: verify
verify: generate ## Regenerate and fail if anything checked in is stale; check formatting and go.mod
	$(GO) mod tidy
	cd hack/tools && $(GO) mod tidy
	@if [ -n "$$(gofmt -l $$(git ls-files '*.go'))" ]; then echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; fi
	@if [ -n "$$(git status --porcelain -- api config go.mod go.sum hack/tools)" ]; then \
		echo "Generated files or go.mod are out of date; run 'make generate' and 'go mod tidy' and commit:"; \
		git status --porcelain -- api config go.mod go.sum hack/tools; git diff --stat; exit 1; fi
	@echo "verify: generated files are current"

.PHONY: lint
lint: ## Run golangci-lint (pinned in hack/tools/go.mod, config in .golangci.yml)
	$(TOOLS) golangci-lint run ./...

.PHONY: k8s-bins
k8s-bins: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from source into the cache
	hack/k8s-bins.sh

.PHONY: octokit-schemas
octokit-schemas: ## Fetch GitHub's OpenAPI description and webhook schemas (npm) into the cache
	hack/octokit-schemas.sh

.PHONY: test
test: k8s-bins octokit-schemas ## Unit and integration tests with the race detector, against a real kube-apiserver
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_BINS)}" GANTRY_OCTOKIT_DIR="$${GANTRY_OCTOKIT_DIR:-$(OCTOKIT_DIR)}" \
		$(GO) test -race -count=1 ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 10s) each
	@for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$dir $$target ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$dir || exit 1; \
		done; \
	done

.PHONY: demo
demo: build k8s-bins ## The whole system on a simulated cluster and GitHub: 40 jobs, a live view, a report (out/demo)
	bin/gantry sim run --scenario demo --out out/demo --k8s-bins "$(K8S_BINS)"

BENCH_SCENARIOS ?= burst steady scale
.PHONY: bench
bench: build k8s-bins ## Benchmark scenarios (BENCH_SCENARIOS) into out/bench, compared with bench/baseline.json
	@status=0; for s in $(BENCH_SCENARIOS); do \
		bin/gantry sim run --scenario $$s --out out/bench/$$s --k8s-bins "$(K8S_BINS)" || status=1; \
	done; \
	bin/gantry sim compare --baseline bench/baseline.json $$(for s in $(BENCH_SCENARIOS); do echo out/bench/$$s/report.json; done); \
	exit $$status

.PHONY: bench-baseline
bench-baseline: ## Make the last `make bench` reports the new baseline (commit bench/baseline.json)
	bin/gantry sim compare --write --baseline bench/baseline.json $$(for s in $(BENCH_SCENARIOS); do echo out/bench/$$s/report.json; done)

.PHONY: clean
clean: ## Remove build outputs (not the cached Kubernetes binaries)
	rm -rf bin out
