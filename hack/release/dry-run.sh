#!/usr/bin/env bash
# `make release-dry-run`: the release pipeline of .github/workflows/release.yml, without
# publishing anything, into out/release/, named for the version of
# charts/gantry/Chart.yaml as tag v<version> would be:
#   image/       the linux/amd64 + linux/arm64 image as an OCI image layout, and
#                gantry-image.tar of it
#   gantry-crds.yaml, gantry-image.digest
#                the release's CRDs and the image's digest (release assets)
#   dist/        gantry for linux and darwin on amd64 and arm64 (GoReleaser, snapshot
#                mode), archives, an SBOM of each binary (*.cdx.json), checksums.txt over
#                them and the two files above, and its signature
#                (checksums.txt.sigstore.json, made with a throwaway key, whose public
#                half is kept as cosign.pub)
#   chart/       the Helm chart package
# Then it rehearses docs/install.md's "From a release" with them on a test control plane
# (test/integration/install, tag release): see docs/install.md#releases for what that
# runs as written, what its own way, and what not at all.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
out=out/release
rm -rf "${out}"
mkdir -p "${out}/image" "${out}/chart"
version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/gantry/Chart.yaml)
chart_version=$(sed -n 's/^version: *\(.*\)$/\1/p' charts/gantry/Chart.yaml)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
ldflags="-X github.com/gantry-dev/gantry/internal/version.Version=${version} -X github.com/gantry-dev/gantry/internal/version.Commit=${commit}"
step() { printf '[release-dry-run %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

step "tools: cyclonedx-gomod (SBOMs) and cosign (signature), pinned in hack/sbom and hack/cosign"
tools="$(pwd)/out/release-tools"
mkdir -p "${tools}"
$GO build -modfile=hack/sbom/go.mod -o "${tools}/cyclonedx-gomod" github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
$GO build -modfile=hack/cosign/go.mod -o "${tools}/cosign" github.com/sigstore/cosign/v2/cmd/cosign
# A throwaway key: a snapshot is signed the way a release is, with nothing to keep but
# the public half, which the rehearsal verifies with.
keys=$(mktemp -d)
trap 'rm -rf "${keys}"' EXIT
(cd "${keys}" && COSIGN_PASSWORD= "${tools}/cosign" generate-key-pair >/dev/null 2>&1)
cp "${keys}/cosign.pub" "${out}/cosign.pub"

step "image ${version}: linux/amd64 and linux/arm64, written as an OCI layout (not pushed)"
spec=()
for arch in amd64 arm64; do
  CGO_ENABLED=0 GOOS=linux GOARCH=${arch} $GO build -trimpath -ldflags "${ldflags}" -o "${out}/image/gantry-linux-${arch}" ./cmd/gantry
  spec+=("${arch}=${out}/image/gantry-linux-${arch}")
done
created=$(git log -1 --format=%ct 2>/dev/null || echo 0)
$GO run ./hack/image --ref "ghcr.io/gantry-dev/gantry:${version}" --version "${version}" --revision "${commit}" \
  --created "${created}" --push "$(IFS=,; echo "${spec[*]}")" --layout "${out}/image/oci" | tee "${out}/image/written.txt"
rm -f "${out}"/image/gantry-linux-*
tar -C "${out}/image/oci" -cf "${out}/image/gantry-image.tar" .
# The release workflow writes the digest it pushed the same way (release.yml).
sed -n 's/^[^ ]*@\(sha256:[0-9a-f]*\).*/\1/p' "${out}/image/written.txt" | head -1 > "${out}/gantry-image.digest"
[[ -s ${out}/gantry-image.digest ]] || { echo "release-dry-run: hack/image printed no digest" >&2; exit 1; }
cat config/crd/bases/*.yaml > "${out}/gantry-crds.yaml"

step "binaries: goreleaser release --snapshot (archives, SBOMs, checksums, signature) as v${chart_version}"
PATH="${tools}:${PATH}" COSIGN_PASSWORD= COSIGN_DRY_RUN_KEY="${keys}/cosign.key" GANTRY_RELEASE_VERSION="${chart_version}" \
  $GO tool -modfile=hack/goreleaser/go.mod goreleaser release --snapshot --clean --config .goreleaser.yaml
"${tools}/cosign" verify-blob --key "${out}/cosign.pub" --insecure-ignore-tlog=true \
  --bundle "${out}/dist/checksums.txt.sigstore.json" "${out}/dist/checksums.txt" >&2
for f in gantry-crds.yaml gantry-image.digest; do
  grep -q " ${f}\$" "${out}/dist/checksums.txt" || { echo "release-dry-run: checksums.txt does not list ${f}" >&2; exit 1; }
  cp "${out}/${f}" "${out}/dist/${f}"
done

step "chart: helm package"
$GO tool -modfile=hack/helm/go.mod helm package charts/gantry --destination "${out}/chart"

(cd "${out}" && sha256sum image/gantry-image.tar chart/*.tgz > checksums-image-chart.txt)
step "built:"
(cd "${out}" && ls -1 dist/*.tar.gz dist/*.cdx.json dist/gantry-crds.yaml dist/gantry-image.digest dist/checksums.txt \
  dist/checksums.txt.sigstore.json image/gantry-image.tar chart/*.tgz checksums-image-chart.txt) >&2

step "rehearsal: docs/install.md's \"From a release\" with these files, on a test control plane"
status=0
KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/k8s-bins.sh --print)}" \
  GANTRY_RELEASE_DIR="$(pwd)/${out}" GANTRY_RELEASE_VERSION="${chart_version}" GANTRY_COSIGN="${tools}/cosign" \
  $GO test -tags release -count=1 -timeout 30m -run '^TestReleaseRehearsal$' -v ./test/integration/install/ \
  > "${out}/rehearsal.log" 2>&1 || status=$?
grep -E '^\s*(--- |PASS|FAIL|ok )|release_test.go' "${out}/rehearsal.log" >&2 || true
if [[ ${status} != 0 ]]; then
  echo "release-dry-run: the rehearsal failed (exit ${status}): ${out}/rehearsal.log" >&2
  exit 1
fi
step "done: out/release, rehearsed (out/release/rehearsal.log)"
