#!/usr/bin/env bash
# Runs the store test suite against PostgreSQL as well as SQLite: installs Debian's PostgreSQL
# server when it is missing, starts a throwaway cluster on a loopback port (its own data folder,
# owned by an unprivileged user), runs `cargo test -p ls-store` with the server's URL, and stops
# the cluster and removes its data however the tests end.
#
#   bash scripts/ci-postgres.sh            # the store tests on both backends
#   LEDGERSHIELD_BIN=target/debug/ledgershield bash scripts/ci-postgres.sh
#                                          # ... then two `serve` replicas on one database: a run
#                                          # stored by `ledgershield run --db` is listed by both
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

BIN="${LEDGERSHIELD_BIN:-}"
[ -n "$BIN" ] || exit 0
echo "== two replicas sharing the PostgreSQL store"
createdb() { as_pg "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U ledgershield -d postgres -c "CREATE DATABASE $1"; }
createdb ls_shared
DB="postgres://ledgershield@127.0.0.1:$PG_PORT/ls_shared"
pids=()
# Stored runs are an operator route: the replicas share one operator key (their own, so they
# neither read nor overwrite the user's key file).
KEY="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
for port in 18501 18502; do
  ADMIN_API_KEY="$KEY" "$BIN" serve --host 127.0.0.1 --port "$port" --db "$DB" >"$PG_DIR/serve-$port.log" 2>&1 &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null || true; stop_pg' EXIT
for port in 18501 18502; do
  for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.1; done
done
"$BIN" run --agent teacher --cases CASE-D-001,CASE-A-001 --db "$DB" --format json >"$PG_DIR/run.json"
run_id="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("run_id") or d["metrics"].get("run_id", ""))' "$PG_DIR/run.json" 2>/dev/null || true)"
for port in 18501 18502; do
  body="$(curl -fsS -H "X-API-Key: $KEY" "http://127.0.0.1:$port/runs")"
  python3 - "$body" "$run_id" "$port" <<'PY'
import json, sys
body, run_id, port = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
runs = body.get("runs", body if isinstance(body, list) else [])
ids = [r.get("run_id") for r in runs]
if not runs or (run_id and run_id not in ids):
    raise SystemExit(f"FAIL: replica on {port} does not list the stored run {run_id!r}: {ids}")
print(f"   replica {port} lists {len(runs)} run(s) from the shared store: {ids[:3]}")
PY
done
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
