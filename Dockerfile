# syntax=docker/dockerfile:1
#
# The aggregator's image (SPEC 10): a static binary on a minimal base,
# running as a non-root user, reading /etc/aggregator/aggregator.yaml.
#
#   docker build -t aggregator --build-arg VERSION=$(git describe --always) .
#   docker run -v $PWD/aggregator.yaml:/etc/aggregator/aggregator.yaml:ro \
#       -e AGGREGATOR_ADMIN_TOKEN -p 8080:8080 aggregator
#
# The last stage (`aggregator`) is the default target; `--target portalsim`
# builds the portal simulator's image, used by deploy/compose.
# Checked in CI by deploy/deploy_test.go.

# Keep at or above the `go` line of go.mod (the test checks it).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# VERSION is stamped with -X main.version; the linker ignores it while the
# command has no such variable (the VCS revision and Go version come from
# the build info that Go records by itself; .git is not in the context, so
# pass REVISION for the record).
ARG VERSION=dev
ARG REVISION=unknown
# CGO_ENABLED=0: a static binary that needs no libc on the final base.
# time/tzdata is linked in by the config package, so the base needs no
# zoneinfo either.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
        -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
        -o /out/aggregator ./cmd/aggregator && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/portalsim ./cmd/portalsim

# The portal simulator, for demos and load tests (deploy/compose).
FROM gcr.io/distroless/static-debian12:nonroot AS portalsim
COPY --from=build /out/portalsim /portalsim
USER 65532:65532
EXPOSE 9100-9107
ENTRYPOINT ["/portalsim"]
CMD ["-listen", "0.0.0.0:9100"]

# The aggregator (default target). distroless/static: CA certificates for
# https portals and webhooks, /etc/passwd with `nonroot`, nothing else.
# The user is numeric so that Kubernetes' runAsNonRoot can verify it.
FROM gcr.io/distroless/static-debian12:nonroot AS aggregator
COPY --from=build /out/aggregator /aggregator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/aggregator"]
CMD ["-config", "/etc/aggregator/aggregator.yaml"]
