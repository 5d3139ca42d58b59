#!/usr/bin/env bash
# Builds the pinned Kubernetes control-plane binaries Gantry's tests and `gantry sim`
# run on: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
#
# Everything is compiled from source fetched through the Go module proxy; no step
# downloads a prebuilt binary. Results land in a versioned cache directory and a binary
# that is already there is not built again. The last line printed is that directory,
# ready for KUBEBUILDER_ASSETS.
#
#   hack/k8s-bins.sh            build what is missing, print the directory
#   hack/k8s-bins.sh --print    print the directory only (builds nothing)
set -euo pipefail

K8S_VERSION=1.36.3
STAGING_VERSION=0.36.3
ETCD_VERSION=3.6.8
KWOK_VERSION=0.8.0

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/gantry/k8s"
out="${cache_root}/v${K8S_VERSION}-etcd${ETCD_VERSION}-kwok${KWOK_VERSION}"

if [[ "${1:-}" == "--print" ]]; then
  echo "${out}"
  exit 0
fi

mkdir -p "${out}"
work="${cache_root}/build"
mkdir -p "${work}"

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"

log() { printf '[k8s-bins %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# with_progress LABEL CMD...: runs CMD (a `go build -v` or `go install -v`, whose
# stderr names each package as it is compiled) and logs, every 30 seconds, how long it
# has run and how many packages it has compiled, so a first build that takes ten
# minutes or more is seen to move. CMD's stderr is shown in full if it fails.
with_progress() {
  local label=$1; shift
  local blog="${work}/${label// /-}.log" t0 tick rc=0
  t0=$(date +%s)
  : >"${blog}"
  ( while sleep 30; do
      log "${label}: building, $(( $(date +%s) - t0 ))s so far, $(grep -c . "${blog}" || true) packages compiled"
    done ) &
  tick=$!
  "$@" 2>"${blog}" || rc=$?
  kill "${tick}" 2>/dev/null || true
  wait "${tick}" 2>/dev/null || true
  if [[ ${rc} != 0 ]]; then cat "${blog}" >&2; return "${rc}"; fi
}

have() {
  local b
  for b in "$@"; do [[ -x "${out}/${b}" ]] || return 1; done
}

build_etcd() {
  if have etcd; then log "etcd ${ETCD_VERSION}: cached"; return; fi
  log "etcd ${ETCD_VERSION}: building (about a minute on 2 cores)"
  local d="${work}/etcd-${ETCD_VERSION}"
  mkdir -p "${d}"
  cat >"${d}/go.mod" <<MOD
module gantry.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 v${ETCD_VERSION}
MOD
  cat >"${d}/main.go" <<'SRC'
// Command etcd is etcd's own main, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
SRC
  (cd "${d}" && go mod tidy && with_progress "etcd ${ETCD_VERSION}" go build -v -trimpath -ldflags '-s -w' -o "${out}/etcd.tmp" .)
  mv "${out}/etcd.tmp" "${out}/etcd"
  log "etcd ${ETCD_VERSION}: done"
}

build_kube() {
  if have kube-apiserver kube-controller-manager kube-scheduler; then
    log "kube-apiserver, kube-controller-manager, kube-scheduler ${K8S_VERSION}: cached"; return
  fi
  log "kube-apiserver, kube-controller-manager, kube-scheduler ${K8S_VERSION}: building (the longest step: most of the 10 minutes measured on a quiet 2-core machine)"
  local d="${work}/kubernetes-${K8S_VERSION}"
  mkdir -p "${d}"
  # Every staging module kubernetes requires at exactly v0.0.0 is replaced by its
  # published v0.N.M twin; pseudo-versions (k8s.io/utils, kube-openapi, …) stay as they are.
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [[ -f "${gomod}" ]] || { log "cannot read kubernetes' go.mod"; exit 1; }
  local staging
  staging=$(awk '$2 == "v0.0.0" && $1 ~ /^k8s\.io\// {print $1}' "${gomod}" | sort -u)
  {
    echo "module gantry.local/kubernetes"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    echo
    local m
    for m in ${staging}; do echo "replace ${m} => ${m} v${STAGING_VERSION}"; done
  } >"${d}/go.mod"
  log "replacing $(echo "${staging}" | wc -l) staging modules with v${STAGING_VERSION}"
  cat >"${d}/tools.go" <<'SRC'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
SRC
  local ld="-s -w"
  local p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X ${p}.gitVersion=v${K8S_VERSION} -X ${p}.gitMajor=${K8S_VERSION%%.*}"
    ld+=" -X ${p}.gitMinor=$(echo "${K8S_VERSION}" | cut -d. -f2) -X ${p}.gitTreeState=clean"
  done
  (cd "${d}" && go mod tidy -e >/dev/null && \
    mkdir -p bin && \
    with_progress "kube binaries ${K8S_VERSION}" go build -v -trimpath -ldflags "${ld}" -o bin/ \
      k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler)
  local b
  for b in kube-apiserver kube-controller-manager kube-scheduler; do mv "${d}/bin/${b}" "${out}/${b}"; done
  log "kube binaries ${K8S_VERSION}: done"
}

build_kwok() {
  if have kwok && [[ -f "${out}/kwok-stages.yaml" ]]; then log "kwok ${KWOK_VERSION}: cached"; return; fi
  if ! have kwok; then
    log "kwok ${KWOK_VERSION}: building (about a minute and a half on 2 cores)"
    local tmpbin="${work}/kwok-bin"
    mkdir -p "${tmpbin}"
    GOFLAGS= GOBIN="${tmpbin}" with_progress "kwok ${KWOK_VERSION}" go install -v -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@v${KWOK_VERSION}"
    mv "${tmpbin}/kwok" "${out}/kwok"
  fi
  # kwok finds no stages on its own: ship the default ones from its module.
  local dir
  dir=$(GOFLAGS= go mod download -json "sigs.k8s.io/kwok@v${KWOK_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  local s first=1
  : >"${out}/kwok-stages.yaml.tmp"
  for s in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    [[ ${first} == 1 ]] || echo "---" >>"${out}/kwok-stages.yaml.tmp"
    first=0
    cat "${dir}/kustomize/stage/${s}.yaml" >>"${out}/kwok-stages.yaml.tmp"
  done
  mv "${out}/kwok-stages.yaml.tmp" "${out}/kwok-stages.yaml"
  log "kwok ${KWOK_VERSION}: done"
}

start=$(date +%s)
build_etcd
build_kube
build_kwok
log "all binaries ready in $(( $(date +%s) - start ))s"
echo "${out}"
