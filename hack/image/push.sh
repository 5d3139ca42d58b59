#!/usr/bin/env bash
# Builds Gantry's image for each of IMAGE_ARCHS and pushes them to IMAGE as one
# multi-architecture image, without a container engine: `make image-push` runs it with
# IMAGE, VERSION, COMMIT and LDFLAGS set. It signs in to the registry with the
# credentials `docker login`, `podman login` or `crane auth login` stored.
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${IMAGE:?}" "${VERSION:?}" "${COMMIT:?}" "${LDFLAGS:?}"
GO=${GO:-go}
archs=${IMAGE_ARCHS:-amd64 arm64}
out=${IMAGE_DIR:-out/image}
created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
mkdir -p "$out"
spec=()
for arch in $archs; do
  echo "image: building gantry for linux/$arch"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch $GO build -trimpath -ldflags "$LDFLAGS" -o "$out/gantry-linux-$arch" ./cmd/gantry
  spec+=("$arch=$out/gantry-linux-$arch")
done
joined=$(IFS=,; echo "${spec[*]}")
$GO run ./hack/image --ref "$IMAGE" --version "$VERSION" --revision "$COMMIT" --created "$created" --push "$joined"
