#!/usr/bin/env bash
# Pre-submission validator: the checks the reference's validator makes, against a running server
# (a local one, or a deployed Space) and this repository.
#
#   bash scripts/validate-submission.sh [BASE_URL] [REPO_DIR]
#
#   BASE_URL   server to check (default: start `ledgershield serve` from LEDGERSHIELD_BIN, or
#              target/release then target/debug, on a free loopback port)
#   REPO_DIR   repository to check (default: this one)
#   SKIP_IMAGE=1  skip the image build (check 1) where no container tool is installed
#
# Checks: 1 the image builds (docker, else podman via scripts/ci-container.sh), 2 openenv.yaml
# carries the manifest fields, 3 /health answers healthy, 4 /reset and /step answer the
# OpenEnv envelope, 5 an agent's stdout follows the [START]/[STEP]/[END] contract.
# Prints each result and "All N/N checks passed", or exits non-zero naming what failed.
set -uo pipefail
URL="${1:-}"
REPO="${2:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$REPO"
pass=0 total=0 failed=()
check() { # name command...
  local name="$1"; shift
  total=$((total + 1))
  if out="$("$@" 2>&1)"; then
    pass=$((pass + 1)); echo "  [PASS] $name"
  else
    failed+=("$name"); echo "  [FAIL] $name"; echo "$out" | tail -15 | sed 's/^/         /'
  fi
}

BIN="${LEDGERSHIELD_BIN:-}"
for b in "$BIN" target/release/ledgershield target/debug/ledgershield; do
  if [ -n "$b" ] && [ -x "$b" ]; then BIN="$b"; break; fi
done
SERVER_PID=""
trap '[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null' EXIT
if [ -z "$URL" ]; then
  [ -x "$BIN" ] || { echo "no server URL and no built ledgershield binary"; exit 2; }
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  LEDGERSHIELD_DB_PATH="$(mktemp -d)/none.db" "$BIN" serve --host 127.0.0.1 --port "$port" >/dev/null 2>&1 &
  SERVER_PID=$!
  URL="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do curl -fsS "$URL/health" >/dev/null 2>&1 && break; sleep 0.1; done
fi
URL="${URL%/}"
echo "== validating $URL and $REPO"

image_builds() {
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    docker build -q -t ledgershield:validate .
  elif command -v podman >/dev/null 2>&1 && [ -x "$BIN" ]; then
    LEDGERSHIELD_BIN="$BIN" bash scripts/ci-container.sh
  else
    echo "neither a working docker nor podman (with a built binary) is available"; return 1
  fi
}
manifest_ok() {
  local f=openenv.yaml
  [ -f "$f" ] || { echo "no $f"; return 1; }
  for key in spec_version name type runtime app port; do
    grep -qE "^$key:[[:space:]]*[^[:space:]]" "$f" || { echo "$f: no '$key'"; return 1; }
  done
  grep -qE '^port:[[:space:]]*8000[[:space:]]*$' "$f" || { echo "$f: port is not 8000"; return 1; }
  local fm=deploy/space/front-matter.yml
  [ -f "$fm" ] || { echo "no $fm (the Space README's front matter)"; return 1; }
  head -n 1 "$fm" | grep -qx -- '---' || { echo "$fm does not start with ---"; return 1; }
  sed -n '2,/^---$/p' "$fm" | grep -qE '^sdk:[[:space:]]*docker' || { echo "front matter: sdk is not docker"; return 1; }
  sed -n '2,/^---$/p' "$fm" | grep -qE '^app_port:[[:space:]]*8000' || { echo "front matter: app_port is not 8000"; return 1; }
}
health_ok() {
  local body; body="$(curl -fsS --max-time 10 "$URL/health")" || return 1
  echo "$body" | grep -qE '"status" *: *"(ok|healthy)"' || { echo "unexpected /health: $body"; return 1; }
}
envelope_ok() {
  local sid="validate-$$" r s
  r="$(curl -fsS --max-time 10 -H "X-Session-Id: $sid" -H 'Content-Type: application/json' -X POST "$URL/reset" -d '{}')" || return 1
  s="$(curl -fsS --max-time 10 -H "X-Session-Id: $sid" -H 'Content-Type: application/json' -X POST "$URL/step" \
        -d '{"action_type": "lookup_policy", "payload": {}}')" || return 1
  for body in "$r" "$s"; do
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); missing=[k for k in ("observation","reward","done") if k not in d]; sys.exit(f"missing {missing}" if missing else 0)' "$body" || return 1
  done
}
stdout_contract_ok() {
  [ -x "$BIN" ] || { echo "no ledgershield binary to play the agent"; return 1; }
  local out; out="$("$BIN" run --agent teacher --url "$URL" --cases CASE-D-001,CASE-A-001 --format contract --no-store)" || return 1
  python3 - "$out" <<'PY'
import re, sys
lines = sys.argv[1].splitlines()
start = re.compile(r"^\[START\] task=\S+ env=ledgershield model=\S+$")
step = re.compile(r"^\[STEP\] step=\d+ action=\w+\(.*\) reward=-?\d+\.\d{2} done=(true|false) error=(null|.+)$")
end = re.compile(r"^\[END\] success=(true|false) steps=\d+ score=\d\.\d{2} rewards=(-?\d+\.\d{2})(,-?\d+\.\d{2})*$")
state, episodes = "start", 0
for l in lines:
    if state == "start" and start.match(l): state = "step"
    elif state == "step" and step.match(l): state = "step_or_end"
    elif state == "step_or_end" and step.match(l): pass
    elif state == "step_or_end" and end.match(l): state, episodes = "start", episodes + 1
    else: sys.exit(f"line breaks the contract: {l!r}")
if state != "start" or episodes != 2: sys.exit(f"{episodes} complete episodes, expected 2")
PY
}

if [ "${SKIP_IMAGE:-0}" = 1 ]; then echo "  [SKIP] image builds (SKIP_IMAGE=1)"; else check "image builds and serves" image_builds; fi
check "openenv.yaml and Space front matter" manifest_ok
check "/health answers" health_ok
check "/reset and /step answer the envelope" envelope_ok
check "agent stdout contract" stdout_contract_ok
if [ "${#failed[@]}" -eq 0 ]; then
  echo "All $pass/$total checks passed"
else
  echo "$pass/$total checks passed; failed: ${failed[*]}"; exit 1
fi
