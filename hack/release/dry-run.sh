#!/usr/bin/env bash
# `make release-dry-run`: the release pipeline of .github/workflows/release.yml, without
# publishing anything, into out/release/:
#   dist/        gantry for linux and darwin on amd64 and arm64 (GoReleaser, snapshot
#                mode), archives, an SBOM of each binary (*.cdx.json), checksums.txt and
#                its signature (checksums.txt.sigstore.json, made with a throwaway key)
#   image/       the linux/amd64 + linux/arm64 image as an OCI image layout, and
#                gantry-image.tar of it
#   chart/       the Helm chart package, at the version of charts/gantry/Chart.yaml
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
out=out/release
rm -rf "${out}"
version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/gantry/Chart.yaml)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
ldflags="-X github.com/gantry-dev/gantry/internal/version.Version=${version} -X github.com/gantry-dev/gantry/internal/version.Commit=${commit}"
step() { printf '[release-dry-run %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

step "tools: cyclonedx-gomod (SBOMs) and cosign (signature), pinned in hack/sbom and hack/cosign"
tools="$(pwd)/out/release-tools"
mkdir -p "${tools}"
$GO build -modfile=hack/sbom/go.mod -o "${tools}/cyclonedx-gomod" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
$GO build -modfile=hack/cosign/go.mod -o "${tools}/cosign" github.com/sigstore/cosign/v2/cmd/cosign
# A throwaway key: a snapshot is signed the way a release is, with nothing to keep.
keys=$(mktemp -d)
trap 'rm -rf "${keys}"' EXIT
(cd "${keys}" && COSIGN_PASSWORD= "${tools}/cosign" generate-key-pair >/dev/null 2>&1)

step "binaries: goreleaser release --snapshot (archives, SBOMs, checksums, signature)"
PATH="${tools}:${PATH}" COSIGN_PASSWORD= COSIGN_DRY_RUN_KEY="${keys}/cosign.key" \
  $GO tool -modfile=hack/goreleaser/go.mod goreleaser release --snapshot --clean --config .goreleaser.yaml
"${tools}/cosign" verify-blob --key "${keys}/cosign.pub" --insecure-ignore-tlog=true \
  --bundle "${out}/dist/checksums.txt.sigstore.json" "${out}/dist/checksums.txt" >&2
mkdir -p "${out}/image" "${out}/chart"

step "image ${version}: linux/amd64 and linux/arm64, written as an OCI layout (not pushed)"
spec=()
for arch in amd64 arm64; do
  CGO_ENABLED=0 GOOS=linux GOARCH=${arch} $GO build -trimpath -ldflags "${ldflags}" -o "${out}/image/gantry-linux-${arch}" ./cmd/gantry
  spec+=("${arch}=${out}/image/gantry-linux-${arch}")
done
created=$(git log -1 --format=%ct 2>/dev/null || echo 0)
$GO run ./hack/image --ref "ghcr.io/gantry-dev/gantry:${version}" --version "${version}" --revision "${commit}" \
  --created "${created}" --push "$(IFS=,; echo "${spec[*]}")" --layout "${out}/image/oci"
rm -f "${out}"/image/gantry-linux-*
tar -C "${out}/image/oci" -cf "${out}/image/gantry-image.tar" .

step "chart: helm package"
$GO tool -modfile=hack/helm/go.mod helm package charts/gantry --destination "${out}/chart"

(cd "${out}" && sha256sum image/gantry-image.tar chart/*.tgz > checksums-image-chart.txt)
step "done:"
(cd "${out}" && ls -1 dist/*.tar.gz dist/*.cdx.json dist/checksums.txt dist/checksums.txt.sigstore.json image/gantry-image.tar chart/*.tgz checksums-image-chart.txt) >&2
