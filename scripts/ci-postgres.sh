#!/usr/bin/env bash
# Runs the store test suite against PostgreSQL as well as SQLite: installs Debian's PostgreSQL
# server when it is missing, starts a throwaway cluster on a loopback port (its own data folder,
# owned by an unprivileged user), runs `cargo test -p ls-store` with the server's URL, and stops
# the cluster and removes its data however the tests end.
#
#   bash scripts/ci-postgres.sh            # the store tests on both backends
#   PG_KEEP=1 bash scripts/ci-postgres.sh  # ... and print the URL, leaving the server running
set -euo pipefail
cd "$(dirname "$0")/.."

PG_PORT="${PG_PORT:-55432}"
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  echo "== installing PostgreSQL (Debian's package)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
PG_BIN="$(dirname "$(ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -1)")"

# PostgreSQL refuses to run as root: the cluster belongs to an unprivileged user.
PG_USER=postgres
if [ "$(id -u)" = 0 ]; then
  id "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home "$PG_USER"
  as_pg() { runuser -u "$PG_USER" -- "$@"; }
else
  PG_USER="$(id -un)"
  as_pg() { "$@"; }
fi

PG_DIR="$(mktemp -d /tmp/ls-pg.XXXXXX)"
chown "$PG_USER" "$PG_DIR"
stop_pg() {
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
}
[ "${PG_KEEP:-0}" = 1 ] || trap stop_pg EXIT

as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U ledgershield --auth=trust -E UTF8 >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c max_connections=200 -c fsync=off" start >/dev/null
URL="postgres://ledgershield@127.0.0.1:$PG_PORT/postgres"
echo "== PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT"
if [ "${PG_KEEP:-0}" = 1 ]; then
  echo "LS_STORE_TEST_POSTGRES_URL=$URL  (stop: $PG_BIN/pg_ctl -D $PG_DIR/data stop)"
  exit 0
fi

echo "== store tests on SQLite and PostgreSQL"
LS_STORE_TEST_POSTGRES_URL="$URL" LS_STORE_REQUIRE_POSTGRES=1 \
  cargo test -p ls-store --locked 2>&1
