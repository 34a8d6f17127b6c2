# LedgerShield server image: ControlBench (default) or the Financial Audit environment.
#
#   docker build -t ledgershield .
#   docker run --rm -p 8000:8000 ledgershield                          # ControlBench
#   docker run --rm -p 8000:8000 -e LEDGERSHIELD_ENV=audit ledgershield  # Financial Audit Env
#
# Build arguments (all optional; see docs/deploy.md):
#   RUST_IMAGE / RUNTIME_IMAGE  the build and runtime base images (point them at a locally
#                               imported base where no registry can be reached)
#   PREBUILT                    path, inside the build context, of an already built `ledgershield`
#                               binary for the same Debian release; when set, the build stage
#                               copies it instead of compiling (CI reuses its test build)
ARG RUST_IMAGE=docker.io/library/rust:1-slim-bookworm
ARG RUNTIME_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${RUST_IMAGE} AS build
ARG PREBUILT=""
WORKDIR /src
COPY . .
RUN set -eu; \
    if [ -n "$PREBUILT" ]; then \
      install -m 0755 "$PREBUILT" /ledgershield; \
    else \
      cargo build --release --locked -p ledgershield; \
      install -m 0755 target/release/ledgershield /ledgershield; \
    fi; \
    /ledgershield --version

FROM ${RUNTIME_IMAGE}
# An unprivileged user owns the data folder (SQLite store); nothing else is writable to it.
RUN set -eu; \
    useradd --uid 10001 --no-create-home --user-group --home-dir /data --shell /usr/sbin/nologin ledgershield; \
    mkdir -p /data; chown ledgershield:ledgershield /data
COPY --from=build /ledgershield /usr/local/bin/ledgershield
ENV HOST=0.0.0.0 \
    PORT=8000 \
    LEDGERSHIELD_ENV=controlbench \
    LEDGERSHIELD_TRACK_MODE=blind \
    LEDGERSHIELD_DB_PATH=/data/ledgershield.db \
    LEDGERSHIELD_LOG=info
USER 10001:10001
WORKDIR /data
EXPOSE 8000
# bash's /dev/tcp: the slim base has no curl, and the check must not need one.
HEALTHCHECK --interval=15s --timeout=3s --start-period=5s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${PORT:-8000} && printf 'GET /health HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/ledgershield"]
CMD ["serve"]
