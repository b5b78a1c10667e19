# syntax=docker/dockerfile:1
# Multi-stage build: a static musl binary on a distroless base, running as non-root 65532.
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-alpine AS builder
# A C toolchain builds ring, the crypto behind every TLS connection (rustls).
RUN apk add --no-cache musl-dev build-base
WORKDIR /src
# Dependencies first, so that source edits reuse the cached dependency layer. The workspace's
# library crates come with them: the manifest names them, and cargo loads every member.
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
# The manifest names an integration-test target; its stub stays for the real build too.
RUN mkdir src && echo 'fn main() {}' > src/main.rs && echo '' > src/lib.rs \
    && mkdir -p tests/integration && echo '' > tests/integration/main.rs \
    && cargo build --release --locked && rm -rf src
COPY src ./src
RUN touch src/main.rs src/lib.rs && cargo build --release --locked \
    && cp target/release/kustomize-controller /kustomize-controller

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kustomize-controller" \
      org.opencontainers.image.description="A drop-in Rust replacement for the Flux kustomize-controller" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/kustomize-controller-rs/kustomize-controller"
COPY --from=builder /kustomize-controller /usr/local/bin/kustomize-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kustomize-controller"]
