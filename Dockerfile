# pleg_exporter's image: built from the sources in a Go image, shipped FROM scratch with nothing but the
# static binary and the CA bundle.
#
#   docker build -t pleg-exporter:0.1.0 .
#
# GO_IMAGE is the builder: any image with the Go of go.mod's go line, a POSIX shell and the CA bundle. The
# default is pulled from your registry; offline, `make go-image` makes one from this machine's Go and
# module cache (make image GO_IMAGE=pleg-exporter-go:<go version>). No BuildKit feature is used: the
# legacy builder builds it too.
ARG GO_IMAGE=golang:1.26.8
# The VERSION file's (a test keeps them equal); REVISION: the commit, where the caller knows it.
ARG VERSION=0.1.0
ARG REVISION=unknown
FROM ${GO_IMAGE} AS build
WORKDIR /src
# The module files and the exporter's packages; go build fetches only the modules they import (a
# `go mod download` would fetch every module of go.mod, the tests' and the tools' too).
COPY go.mod go.sum ./
COPY cmd/ cmd/
COPY collector/ collector/
COPY diagnose/ diagnose/
COPY gc/ gc/
COPY pleg/ pleg/
COPY runtime/ runtime/
# VERSION and REVISION name the build in pleg_exporter --version and pleg_exporter_build_info; no date
# and no paths go in, so the same sources and Go build the same binary.
ARG VERSION
ARG REVISION
# TARGETARCH: the image's architecture, which BuildKit sets (docker buildx build --platform linux/arm64);
# the legacy builder leaves it empty, which builds for the machine's own.
ARG TARGETARCH
RUN set -eu; \
    pkg=github.com/prometheus/common/version; \
    CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH:-} GOFLAGS=-mod=readonly go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X $pkg.Version=$VERSION -X $pkg.Revision=$REVISION -X $pkg.Branch=unknown -X $pkg.BuildUser=docker" \
      -o /out/bin/pleg_exporter ./cmd/pleg_exporter; \
    mkdir -p /out/etc/ssl/certs; \
    cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ca-certificates.crt

FROM scratch
ARG VERSION
LABEL org.opencontainers.image.title="pleg_exporter" \
      org.opencontainers.image.description="Warns before a Kubernetes node turns NotReady with 'PLEG is not healthy'" \
      org.opencontainers.image.source="https://github.com/pleg-exporter/pleg_exporter" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/ /
# Non-root by default; the DaemonSet runs it as uid 0 with every capability dropped where the runtime
# socket is root-only (see deploy/kubernetes).
USER 65534:65534
EXPOSE 10391
ENTRYPOINT ["/bin/pleg_exporter"]
