# Gantry's build, test and verification entry points. `make help` lists them.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO ?= go
TOOLS := $(GO) tool -modfile=hack/tools/go.mod
# helm and kustomize, pinned apart from TOOLS (helm needs newer k8s.io modules).
DEPLOY_TOOLS := $(GO) tool -modfile=hack/helm/go.mod
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/gantry-dev/gantry/internal/version.Version=$(VERSION) \
           -X github.com/gantry-dev/gantry/internal/version.Commit=$(COMMIT)
# Integration tests find the control plane here unless KUBEBUILDER_ASSETS is set.
K8S_BINS = $(shell hack/k8s-bins.sh --print)
# The simulator's conformance test finds GitHub's schemas here unless GANTRY_OCTOKIT_DIR is set.
OCTOKIT_DIR = $(shell hack/octokit-schemas.sh --print)
# `make image`: the image's name, how it is built (auto: docker or podman when an engine
# answers, else none: daemonless into IMAGE_DIR) and, daemonless, its architecture.
IMAGE ?= ghcr.io/gantry-dev/gantry:$(VERSION)
CONTAINER_ENGINE ?= auto
IMAGE_DIR ?= out/image
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
# How many inputs each fuzz target runs in `make fuzz`. A count, not a duration: with a
# duration, Go 1.26's fuzz coordinator can fail a target with "context deadline
# exceeded" when time runs out mid-input (golang/go#75804), which is no finding.
FUZZTIME ?= 50000x

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/gantry
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/gantry ./cmd/gantry

.PHONY: generate
generate: ## Regenerate deepcopy code, CRDs, RBAC, docs/reference/api.md and the install docs' objects and rights from the API types, markers and rendered installs
	$(TOOLS) controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(TOOLS) controller-gen crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/crddesc -under spec.template config/crd/bases/*.yaml
	$(TOOLS) controller-gen rbac:roleName=gantry-manager paths=./internal/controller/... output:rbac:artifacts:config=config/rbac
	rm -f charts/gantry/crds/*.yaml && cp config/crd/bases/*.yaml charts/gantry/crds/
	cp config/rbac/role.yaml charts/gantry/files/role.yaml
	cp config/rbac/container_hook_role.yaml charts/gantry/files/container_hook_role.yaml
	cp config/container-hooks/admission-policy.yaml charts/gantry/files/container_hook_policy.yaml
	$(GO) run ./hack/refdocs -api api/v1alpha1 -out docs/reference/api.md
	$(GO) run ./hack/installdocs

# What `make generate` and `go mod tidy` write, which `make verify` wants committed: the
# install docs hold generated sections (hack/installdocs) beside hand-written text.
GENERATED := api config docs/reference docs/install.md charts/gantry/README.md go.mod go.sum hack/tools hack/helm \
	hack/actionlint hack/goreleaser hack/sbom hack/cosign charts/gantry/crds charts/gantry/files
.PHONY: verify
verify: generate ## Regenerate and fail if anything checked in is stale; check formatting and go.mod
	$(GO) mod tidy
	cd hack/tools && $(GO) mod tidy
	cd hack/helm && $(GO) mod tidy
	cd hack/actionlint && $(GO) mod tidy
	cd hack/goreleaser && $(GO) mod tidy
	cd hack/sbom && $(GO) mod tidy
	cd hack/cosign && $(GO) mod tidy
	@if [ -n "$$(gofmt -l $$(git ls-files '*.go'))" ]; then echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; fi
	@if [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
		echo "Generated files or go.mod are out of date; run 'make generate' and 'go mod tidy' and commit:"; \
		git status --porcelain -- $(GENERATED); git diff --stat; exit 1; fi
	@echo "verify: generated files are current"

.PHONY: lint
lint: ## Run golangci-lint (pinned in hack/tools/go.mod, config in .golangci.yml)
	$(TOOLS) golangci-lint run ./...
	$(GO) tool -modfile=hack/actionlint/go.mod actionlint

.PHONY: image
image: ## Build the container image: Dockerfile with docker/podman, else daemonless into out/image (CONTAINER_ENGINE=auto|docker|podman|none)
	IMAGE='$(IMAGE)' VERSION='$(VERSION)' COMMIT='$(COMMIT)' LDFLAGS='$(LDFLAGS)' GO='$(GO)' \
		CONTAINER_ENGINE='$(CONTAINER_ENGINE)' IMAGE_DIR='$(IMAGE_DIR)' IMAGE_ARCH='$(IMAGE_ARCH)' hack/image/build.sh

# `make image-push`: the architectures of the multi-architecture image it pushes.
IMAGE_ARCHS ?= amd64 arm64
.PHONY: image-push
image-push: ## Build the image for IMAGE_ARCHS (no container engine needed) and push it to IMAGE as one multi-architecture image
	IMAGE='$(IMAGE)' VERSION='$(VERSION)' COMMIT='$(COMMIT)' LDFLAGS='$(LDFLAGS)' GO='$(GO)' \
		IMAGE_DIR='$(IMAGE_DIR)' IMAGE_ARCHS='$(IMAGE_ARCHS)' hack/image/push.sh

.PHONY: release-dry-run
release-dry-run: k8s-bins ## The release pipeline without publishing, into out/release (archives, SBOMs, CRDs, image digest, signed checksums; the multi-arch image as an OCI tarball; the chart package), then its install rehearsed on a test control plane
	GO='$(GO)' hack/release/dry-run.sh

.PHONY: lint-workflows
lint-workflows: ## Lint the GitHub Actions workflows (.github/workflows) with actionlint, pinned in hack/actionlint/go.mod
	$(GO) tool -modfile=hack/actionlint/go.mod actionlint

.PHONY: deploy-tools
deploy-tools: ## Build the pinned helm, kustomize and kubectl (hack/helm/go.mod) into Go's build cache
	$(DEPLOY_TOOLS) -n helm >/dev/null
	$(DEPLOY_TOOLS) -n kustomize >/dev/null
	cd hack/helm && $(GO) build -o /dev/null ./kubectl

.PHONY: helm-lint
helm-lint: ## Lint the Helm chart (charts/gantry) with the pinned helm and render it with its defaults
	$(DEPLOY_TOOLS) helm lint --strict charts/gantry
	$(DEPLOY_TOOLS) helm template gantry charts/gantry --namespace gantry-system >/dev/null

.PHONY: k8s-bins
k8s-bins: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from source into the cache
	hack/k8s-bins.sh

.PHONY: octokit-schemas
octokit-schemas: ## Fetch GitHub's OpenAPI description and webhook schemas (npm) into the cache
	hack/octokit-schemas.sh

.PHONY: test
test: k8s-bins octokit-schemas deploy-tools ## Unit and integration tests with the race detector, against a real kube-apiserver
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_BINS)}" GANTRY_OCTOKIT_DIR="$${GANTRY_OCTOKIT_DIR:-$(OCTOKIT_DIR)}" \
		$(GO) test -race -count=1 ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME inputs (default 50000x) each
	@for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -h '^func Fuzz' $$dir/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$dir $$target ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$dir || exit 1; \
		done; \
	done

.PHONY: demo
demo: build k8s-bins ## The whole system on a simulated cluster and GitHub: 40 jobs, a live view, a report (out/demo)
	bin/gantry sim run --scenario demo --out out/demo --k8s-bins "$(K8S_BINS)"

# burst-scaleset right after burst: its pickup is judged against burst's of the same run.
BENCH_SCENARIOS ?= burst burst-scaleset fleet steady scale idle-scalesets burst-scalesets-50 container-jobs disruptions
# BENCH_REPEAT runs each scenario that many times (into out/bench/SCENARIO/runN) and
# compares their medians: a burst's p99 moves by half from run to run on two cores.
BENCH_REPEAT ?= 1
bench_reports = $(foreach s,$(BENCH_SCENARIOS),$(if $(filter 1,$(BENCH_REPEAT)),out/bench/$(s)/report.json,$(foreach i,$(shell seq 1 $(BENCH_REPEAT)),out/bench/$(s)/run$(i)/report.json)))
.PHONY: bench
bench: build k8s-bins ## Benchmark scenarios (BENCH_SCENARIOS, each BENCH_REPEAT times) into out/bench, compared with bench/baseline.json
	@status=0; for r in $(bench_reports); do \
		d=$${r%/report.json}; s=$${d#out/bench/}; s=$${s%%/*}; \
		bin/gantry sim run --scenario $$s --out $$d --k8s-bins "$(K8S_BINS)" || status=1; \
	done; \
	bin/gantry sim compare --baseline bench/baseline.json $(bench_reports); \
	exit $$status

.PHONY: bench-baseline
bench-baseline: ## Make the last `make bench` reports (same BENCH_SCENARIOS and BENCH_REPEAT) the new baseline (commit bench/baseline.json)
	bin/gantry sim compare --write --baseline bench/baseline.json $(bench_reports)

# `make reliability`: how much load and how long the faults (CI runs the same tests at 1
# in `make test`), and which `gantry sim run` scenarios to fold in ("" skips them).
RELIABILITY_SCALE ?= 3
RELIABILITY_SIM ?= faults disruptions-short
.PHONY: reliability
reliability: build k8s-bins ## Reliability suite at RELIABILITY_SCALE: HA, restart, GitHub, webhook and Kubernetes faults, secrets, RBAC → out/reliability/reliability.json and a table
	@rm -rf out/reliability/figures $(foreach s,$(RELIABILITY_SIM),out/reliability/sim-$(s)); mkdir -p out/reliability; status=0; \
	KUBEBUILDER_ASSETS="$${KUBEBUILDER_ASSETS:-$(K8S_BINS)}" GANTRY_RELIABILITY_SCALE=$(RELIABILITY_SCALE) \
		GANTRY_RELIABILITY_OUT="$(CURDIR)/out/reliability/figures" GANTRY_RELIABILITY_BIN="$(CURDIR)/bin/gantry" \
		$(GO) test -count=1 -parallel 1 -timeout 90m -v ./test/reliability/ > out/reliability/test.log 2>&1 || status=1; \
	grep -E '^(--- |\s+figures_test.go|PASS|FAIL|ok )' out/reliability/test.log || true; \
	sims=""; for s in $(RELIABILITY_SIM); do \
		bin/gantry sim run --scenario $$s --out out/reliability/sim-$$s --k8s-bins "$(K8S_BINS)" \
			> out/reliability/sim-$$s.log 2>&1 || status=1; \
		sims="$$sims$${sims:+,}out/reliability/sim-$$s/report.json"; done; \
	$(GO) run ./hack/reliability -in out/reliability/figures -out out/reliability/reliability.json $${sims:+-sim $$sims} || status=1; \
	exit $$status

.PHONY: clean
clean: ## Remove build outputs (not the cached Kubernetes binaries)
	rm -rf bin out
