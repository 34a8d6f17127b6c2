#!/usr/bin/env bash
# Container smoke test: builds the image from the repository's Dockerfile with podman (Debian's
# package) and runs the server from the built image's root filesystem.
#
# No registry for base images is reachable here, so the base is made locally: debootstrap
# (Debian's package) of the Debian release the Dockerfile's standard FROM lines name, imported
# with `podman import`, and passed as the RUST_IMAGE / RUNTIME_IMAGE build arguments. The build
# stage copies an already built binary (PREBUILT, the CI test build) instead of compiling again;
# without a binary the image compiles from source, which needs a Rust base image.
# `podman run` cannot start containers in this sandbox (crun cannot set rlimits), so the server
# is started from the image's root filesystem (`podman mount`) with unshare + chroot, under the
# image's user, environment and entrypoint as `podman image inspect` reports them; the image's
# HEALTHCHECK command is run inside that root the same way.
#
#   LEDGERSHIELD_BIN=target/debug/ledgershield bash scripts/ci-container.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${LEDGERSHIELD_BIN:-target/debug/ledgershield}"
IMAGE="${IMAGE:-localhost/ledgershield:ci}"
BASE="${BASE_IMAGE:-localhost/ledgershield-base:bookworm}"
PORT="${SMOKE_PORT:-18180}"

need() { command -v "$1" >/dev/null 2>&1; }
if ! need podman || ! need debootstrap; then
  echo "== installing podman and debootstrap (Debian's packages)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman debootstrap >/dev/null
fi
[ -x "$BIN" ] || { echo "no binary at $BIN (build it first)"; exit 1; }

WORK="$(mktemp -d /tmp/ls-container.XXXXXX)"
CID=""
PIDFILE="$WORK/server.pid"
cleanup() {
  if [ -s "$PIDFILE" ]; then kill -KILL "$(cat "$PIDFILE")" 2>/dev/null || true; fi
  if [ -n "$CID" ]; then
    podman umount "$CID" >/dev/null 2>&1 || true
    podman rm -f "$CID" >/dev/null 2>&1 || true
  fi
  # The base stays for the next run; the test image is removed (disk).
  [ "${KEEP_IMAGE:-0}" = 1 ] || podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
  # On a CI machine also the build stage's untagged images (a developer's own are left alone).
  [ "${CI:-}" = true ] && podman image prune -f >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

t0=$(date +%s)
if ! podman image exists "$BASE"; then
  echo "== base image: debootstrap bookworm (minbase) -> podman import $BASE"
  mirror="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)"
  [ -n "$mirror" ] || mirror="$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list)"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; exit 1; }
  tar -C "$WORK/rootfs" -c . | podman import - "$BASE" >/dev/null
  rm -rf "$WORK/rootfs"
fi
t1=$(date +%s)

echo "== podman build (Dockerfile, prebuilt binary, local base)"
mkdir -p "$WORK/ctx/prebuilt"
cp Dockerfile .dockerignore "$WORK/ctx/"
cp "$BIN" "$WORK/ctx/prebuilt/ledgershield"
podman build --isolation chroot --format docker --pull=never -q \
  --build-arg RUST_IMAGE="$BASE" --build-arg RUNTIME_IMAGE="$BASE" \
  --build-arg PREBUILT=prebuilt/ledgershield -t "$IMAGE" "$WORK/ctx" >/dev/null
t2=$(date +%s)

# The image's metadata, as a container runtime would read it.
podman image inspect "$IMAGE" >"$WORK/inspect.json"
python3 - "$WORK/inspect.json" "$WORK" <<'PY'
import json, sys
img = json.load(open(sys.argv[1]))[0]
cfg = img["Config"]
fail = []
if cfg.get("User") != "10001:10001": fail.append(f"user {cfg.get('User')!r}, not the unprivileged 10001")
if "8000/tcp" not in (cfg.get("ExposedPorts") or {}): fail.append("port 8000 not exposed")
env = dict(e.split("=", 1) for e in cfg.get("Env", []))
for k, v in {"HOST": "0.0.0.0", "PORT": "8000", "LEDGERSHIELD_ENV": "controlbench"}.items():
    if env.get(k) != v: fail.append(f"{k}={env.get(k)!r}, expected {v!r}")
hc = (img.get("Healthcheck") or cfg.get("Healthcheck") or {}).get("Test") or []
if not hc or "/health" not in " ".join(hc): fail.append(f"no HEALTHCHECK on /health: {hc}")
if fail:
    print("FAIL: image metadata:", "; ".join(fail)); sys.exit(1)
w = sys.argv[2]
open(f"{w}/env", "w").write("\0".join(f"{k}={v}" for k, v in env.items() if k not in ("PORT", "HOST")))
open(f"{w}/cmd", "w").write("\0".join((cfg.get("Entrypoint") or []) + (cfg.get("Cmd") or [])))
open(f"{w}/healthcheck", "w").write("\0".join(hc[1:] if hc[0] == "CMD" else ["bash", "-c", hc[1]]))
print(f"== image: user {cfg['User']}, workdir {cfg.get('WorkingDir')}, healthcheck {hc[0]}, "
      f"{img['Size'] // (1024 * 1024)} MiB")
PY

CID="$(podman create "$IMAGE")"
ROOT="$(podman mount "$CID")"

# Start the image's entrypoint+cmd inside its root, as its user, with its environment.
start_in_image() { # env_kind port
  local env_kind="$1" port="$2"
  mapfile -d '' -t envs <"$WORK/env"
  mapfile -d '' -t cmd <"$WORK/cmd"
  unshare --mount --pid --fork --kill-child=SIGTERM --mount-proc="$ROOT/proc" \
    chroot --userspec=10001:10001 "$ROOT" \
    env -i "${envs[@]}" "HOST=127.0.0.1" "PORT=$port" "LEDGERSHIELD_ENV=$env_kind" \
    "${cmd[@]}" >"$WORK/server-$env_kind.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "FAIL: the $env_kind server from the image did not answer /health"; cat "$WORK/server-$env_kind.log"; return 1
}
# unshare --fork ignores SIGTERM while it waits: signal the server (its child) for a graceful stop.
stop_server() {
  local pid; pid="$(cat "$PIDFILE")"
  pkill -TERM -P "$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  : >"$PIDFILE"
}

echo "== ControlBench from the image"
start_in_image controlbench "$PORT"
mapfile -d '' -t hc <"$WORK/healthcheck"
PORT="$PORT" chroot --userspec=10001:10001 "$ROOT" env "PORT=$PORT" "${hc[@]}" \
  || { echo "FAIL: the image's HEALTHCHECK command failed"; exit 1; }
echo "   HEALTHCHECK command passes"
curl -fsS "http://127.0.0.1:$PORT/health" | grep -q '"ok"\|healthy' || { echo "FAIL: /health body"; exit 1; }
H=(-fsS -H 'X-Session-Id: container-smoke' -H 'Content-Type: application/json')
curl "${H[@]}" -X POST "http://127.0.0.1:$PORT/reset" -d '{"case_id": "CASE-D-001"}' | grep -q '"observation"'
curl "${H[@]}" -X POST "http://127.0.0.1:$PORT/step" \
  -d '{"action_type": "inspect_email_thread", "payload": {"thread_id": "THR-100"}}' | grep -q '"done":false'
curl "${H[@]}" -X POST "http://127.0.0.1:$PORT/step" \
  -d '{"action_type": "submit_decision", "payload": {"decision": "ESCALATE_FRAUD", "confidence": 0.9}}' \
  | grep -q '"final_score"' || { echo "FAIL: the episode did not end graded"; exit 1; }
curl -fsS "http://127.0.0.1:$PORT/metrics" | grep -q 'ledgershield_episodes_started_total{transport="http"} 1' \
  || { echo "FAIL: /metrics did not count the episode"; exit 1; }
echo "   /health, reset, step, graded submit, /metrics: ok"
stop_server

echo "== Financial Audit Env from the image (LEDGERSHIELD_ENV=audit)"
start_in_image audit "$PORT"
curl -fsS -X POST -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/reset" -d '{}' | grep -q 'task' \
  || { echo "FAIL: audit reset"; exit 1; }
echo "   /health, reset: ok"
stop_server
t3=$(date +%s)
echo "== container smoke passed (base $((t1 - t0)) s, build $((t2 - t1)) s, run $((t3 - t2)) s)"
