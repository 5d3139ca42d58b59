#!/usr/bin/env bash
# Builds Gantry's container image; `make image` runs it with IMAGE, VERSION, COMMIT and
# LDFLAGS (the Makefile's version flags) set.
#
# With a docker or podman engine that answers, it builds the Dockerfile. Without one
# (CONTAINER_ENGINE=none, or auto and nothing answers) it builds the same image
# daemonlessly: the static binary, cross-compiled for IMAGE_ARCH, on a minimal nonroot
# base (hack/image), written to IMAGE_DIR as an OCI image layout (oci/) and a tarball
# for `docker load`, `podman load` or `kind load image-archive`.
set -euo pipefail
cd "$(dirname "$0")/../.."

: "${IMAGE:?}" "${VERSION:?}" "${COMMIT:?}" "${LDFLAGS:?}"
GO=${GO:-go}
engine=${CONTAINER_ENGINE:-auto}
if [[ $engine == auto ]]; then
  engine=none
  for e in docker podman; do
    if command -v "$e" >/dev/null 2>&1 && timeout 20 "$e" info >/dev/null 2>&1; then
      engine=$e
      break
    fi
  done
fi

case $engine in
docker | podman)
  echo "image: building $IMAGE from the Dockerfile with $engine"
  exec "$engine" build --build-arg VERSION="$VERSION" --build-arg COMMIT="$COMMIT" -t "$IMAGE" .
  ;;
none) ;;
*)
  echo "CONTAINER_ENGINE=$engine: want auto, docker, podman or none" >&2
  exit 2
  ;;
esac

arch=${IMAGE_ARCH:-$($GO env GOARCH)}
out=${IMAGE_DIR:-out/image}
# Every file in the image is dated like the commit, so one commit builds one digest.
created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
echo "image: no container engine; building $IMAGE for linux/$arch into $out"
mkdir -p "$out"
CGO_ENABLED=0 GOOS=linux GOARCH=$arch $GO build -trimpath -ldflags "$LDFLAGS" -o "$out/gantry-linux-$arch" ./cmd/gantry
$GO run ./hack/image --binary "$out/gantry-linux-$arch" --arch "$arch" --out "$out" --ref "$IMAGE" \
  --version "$VERSION" --revision "$COMMIT" --created "$created"
