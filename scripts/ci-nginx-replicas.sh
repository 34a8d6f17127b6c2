#!/usr/bin/env bash
# Replicas behind nginx: starts N `ledgershield serve` replicas on loopback and Debian's nginx in
# front of them with deploy/nginx/ledgershield.conf (ports rewritten), then plays whole episodes
# through nginx over HTTP (`ledgershield load`: many sessions, each episode must reproduce its
# solo score, so a session that lost its state on another replica shows as interference) and
# over /ws (scripts/replica_check.py), then 300 clients at once (each from its own loopback address,
# one keep-alive connection each) that must all be served without a 503, and checks the spread from
# each replica's /metrics.
# Stops everything it started however it ends.
#
#   LEDGERSHIELD_BIN=target/debug/ledgershield bash scripts/ci-nginx-replicas.sh
#   SCALE=1 LEDGERSHIELD_BIN=target/release/ledgershield bash scripts/ci-nginx-replicas.sh
#       (also measures episodes/s through nginx with 1, 2 and 3 replicas)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$(realpath "${LEDGERSHIELD_BIN:-target/debug/ledgershield}")"
REPLICAS="${REPLICAS:-3}"
HTTP_EPISODES="${HTTP_EPISODES:-1200}"
HTTP_SESSIONS="${HTTP_SESSIONS:-96}"
WS_CONNECTIONS="${WS_CONNECTIONS:-30}"
WS_EPISODES="${WS_EPISODES:-10}"
CLIENTS="${CLIENTS:-300}"
BASE_PORT="${BASE_PORT:-18300}"
LB_PORT=$((BASE_PORT))

if ! command -v nginx >/dev/null 2>&1; then
  echo "== installing nginx (Debian's package)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null
  # The package starts the system nginx on port 80; this test runs its own.
  (systemctl stop nginx || service nginx stop || nginx -s stop) >/dev/null 2>&1 || true
fi
[ -x "$BIN" ] || { echo "no binary at $BIN"; exit 1; }

WORK="$(mktemp -d /tmp/ls-nginx.XXXXXX)"
stop_all() {
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  for f in "$WORK"/replica-*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  sleep 0.3
  rm -rf "$WORK"
}
trap stop_all EXIT

start_replicas() { # count
  for i in $(seq 1 "$1"); do
    local port=$((BASE_PORT + i))
    # The flags deploy/nginx/ledgershield.conf gives. The per-client rate limit is raised: the
    # load generator below is one client (127.0.0.1, forwarded by nginx) playing thousands of
    # episodes a minute.
    LEDGERSHIELD_DB_PATH="$WORK/none.db" LEDGERSHIELD_LOG=warn RATE_LIMIT_PER_MIN=10000000 \
      "$BIN" serve --host 127.0.0.1 --port "$port" --trust-proxy-headers \
      --trusted-proxies 127.0.0.1,::1 --max-connections 4096 \
      >"$WORK/replica-$i.log" 2>&1 &
    echo $! >"$WORK/replica-$i.pid"
  done
  for i in $(seq 1 "$1"); do
    for _ in $(seq 1 200); do
      curl -fsS "http://127.0.0.1:$((BASE_PORT + i))/health" >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
}
stop_replicas() {
  for f in "$WORK"/replica-*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true; wait "$(cat "$f")" 2>/dev/null || true; rm -f "$f"
  done
}

start_nginx() { # replica count: the example config, its upstream list and port rewritten
  local servers=""
  for i in $(seq 1 "$1"); do
    servers+="    server 127.0.0.1:$((BASE_PORT + i)) max_fails=3 fail_timeout=10s;\n"
  done
  sed -e '/^    server 127\.0\.0\.1:800[0-9]/d' \
      -e "s|^    hash \$ledgershield_affinity consistent;|&\n$servers|" \
      -e "s|^    listen 8000;|    listen 127.0.0.1:$LB_PORT;|" \
      deploy/nginx/ledgershield.conf >"$WORK/site.conf"
  cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/body;
  proxy_temp_path $WORK/proxy;
  include $WORK/site.conf;
}
CONF
  nginx -t -q -c "$WORK/nginx.conf" -p "$WORK"
  nginx -c "$WORK/nginx.conf" -p "$WORK"
  for _ in $(seq 1 50); do curl -fsS "http://127.0.0.1:$LB_PORT/health" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "nginx did not come up"; cat "$WORK/nginx-error.log"; return 1
}
stop_nginx() {
  [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
  for _ in $(seq 1 50); do [ -f "$WORK/nginx.pid" ] || break; sleep 0.1; done
}

replica_urls() { local u=""; for i in $(seq 1 "$1"); do u+="http://127.0.0.1:$((BASE_PORT + i)),"; done; echo "${u%,}"; }

echo "== $REPLICAS replicas behind nginx on 127.0.0.1:$LB_PORT"
start_replicas "$REPLICAS"
start_nginx "$REPLICAS"
LB="http://127.0.0.1:$LB_PORT"

echo "== HTTP: $HTTP_EPISODES episodes over $HTTP_SESSIONS sessions through nginx"
"$BIN" load --url "$LB" --concurrency "$HTTP_SESSIONS" --episodes "$HTTP_EPISODES" --json >"$WORK/http.json"
python3 - "$WORK/http.json" "$HTTP_EPISODES" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][-1]
# `load` exits non-zero on any failed request; here it also counts episodes whose score differs
# from the same sequence played alone (a session that lost its state on another replica).
print(json.dumps({k: run[k] for k in ("episodes", "concurrency", "interference_errors", "episodes_per_s")}))
if run["episodes"] < int(sys.argv[2]) or run["interference_errors"]:
    raise SystemExit("FAIL: HTTP episodes through nginx lost state")
PY

echo "== WebSocket: $WS_CONNECTIONS connections x $WS_EPISODES episodes over /ws through nginx"
python3 scripts/replica_check.py ws --url "$LB" --connections "$WS_CONNECTIONS" --episodes "$WS_EPISODES"

echo "== $CLIENTS clients at once, each from its own address, through nginx: no 503"
python3 scripts/replica_check.py clients --url "$LB" --clients "$CLIENTS"

echo "== spread over the replicas (each replica's /metrics)"
python3 scripts/replica_check.py spread --replicas "$(replica_urls "$REPLICAS")" --min-share 0.6

echo "== affinity: one session's requests reach one replica"
before="$(python3 scripts/replica_check.py spread --replicas "$(replica_urls "$REPLICAS")" --min-share 0)"
for _ in 1 2 3; do
  curl -fsS -H 'X-Session-Id: sticky-check' -X POST "$LB/reset" -d '{"case_id": "CASE-A-001"}' >/dev/null
done
after="$(python3 scripts/replica_check.py spread --replicas "$(replica_urls "$REPLICAS")" --min-share 0)"
python3 - "$before" "$after" <<'PY'
import json, sys
b, a = (json.loads(x)["episodes_per_replica"] for x in sys.argv[1:3])
moved = [y - x for x, y in zip(b, a)]
if sorted(moved) != [0] * (len(moved) - 1) + [3]:
    raise SystemExit(f"FAIL: one session's resets landed on several replicas: {moved}")
print(f"   three resets of one session all on one replica: {moved}")
PY

if [ "${SCALE:-0}" = 1 ]; then
  echo "== scale: episodes/s through nginx with 1, 2, 3 replicas (HTTP, 64 sessions)"
  for n in 1 2 3; do
    stop_nginx; stop_replicas
    start_replicas "$n"; start_nginx "$n"
    "$BIN" load --url "$LB" --concurrency 64 --episodes "${SCALE_EPISODES:-4000}" --json >"$WORK/scale-$n.json"
    python3 - "$WORK/scale-$n.json" "$n" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][-1]
print("   %s replica(s): %s episodes/s, p50 %s ms, p99 %s ms, interference %s" % (
    sys.argv[2], run["episodes_per_s"], run["latency_ms_p50"], run["latency_ms_p99"],
    run["interference_errors"]))
PY
  done
fi
echo "== nginx replica test passed"
