# syntax=docker/dockerfile:1
# Gantry's container image: the static gantry binary on distroless's static nonroot base,
# run as user 65532. `make image` builds it with docker or podman when an engine runs,
# and otherwise builds the same shape without one (hack/image).
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse --short HEAD) -t gantry .

# The binary is built on the build machine's platform and cross-compiled to the target's.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
# `make build` links with the Makefile's version flags (internal/version) and CGO_ENABLED=0.
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH make build VERSION="$VERSION" COMMIT="$COMMIT"

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="gantry" \
      org.opencontainers.image.description="Gantry: GitHub Actions self-hosted runners on Kubernetes as ephemeral, just-in-time pods" \
      org.opencontainers.image.source="https://github.com/gantry-dev/gantry" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$COMMIT"
COPY --from=build /src/bin/gantry /usr/local/bin/gantry
USER 65532
ENTRYPOINT ["/usr/local/bin/gantry"]
CMD ["controller"]
