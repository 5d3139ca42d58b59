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

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

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

.PHONY: test
test: k8s-bins ## Unit and integration tests with the race detector, against a real kube-apiserver
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_BINS)}" $(GO) test -race -count=1 ./...

.PHONY: clean
clean: ## Remove build outputs (not the cached Kubernetes binaries)
	rm -rf bin out
