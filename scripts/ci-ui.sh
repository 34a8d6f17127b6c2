#!/usr/bin/env bash
# Browser tests of the workbench (/ui/): headless Chromium from Debian's `chromium` package driven
# by Playwright (ui-tests/). Installs what it needs (apt chromium if missing, npm ci), generates a
# report into a fresh database, starts the real ControlBench and audit servers on ephemeral ports
# and runs the tests. Screenshots are written to target/ui-screenshots/ (ignored by git), never over
# the tracked docs/screenshots/ unless LS_UPDATE_SCREENSHOTS=1; the run fails if a tracked file
# under docs/screenshots/ changed anyway, so a clean clone stays clean.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (apt)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
export CHROMIUM_PATH="$(command -v chromium)"

echo "== npm ci (ui-tests)"
(cd ui-tests && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)

LS_BIN="${LEDGERSHIELD_BIN:-$PWD/target/debug/ledgershield}"
if [ ! -x "$LS_BIN" ]; then
  cargo build -p ledgershield --locked
fi
export LS_BIN

WORK="$(mktemp -d)"
# Servers' pids go to files: `start_server` runs in a command substitution (a subshell), where
# appending to an array would not reach this shell.
cleanup() {
  for f in "$WORK"/*.pid; do
    [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

export LS_DB="$WORK/ledgershield.db"
# Operator routes need the operator key from every address: the servers get this one, and the
# workbench tests open the pages that read operator views (replay, report rows) with ?token=.
LS_OPERATOR_KEY="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export LS_OPERATOR_KEY
echo "== ledgershield report (fresh database)"
LEDGERSHIELD_DB_PATH="$LS_DB" "$LS_BIN" report --format json --out "$WORK/report" >/dev/null

# A mock OpenAI-compatible endpoint (two scripted policies): the agent-runner's llm agent plays
# against it, and one live comparison of its two models is stored for the Leaderboard page.
node ui-tests/mock-llm.mjs >"$WORK/mock-llm.log" 2>&1 &
echo "$!" >"$WORK/mock-llm.pid"
LS_MOCK_LLM_URL=""
for _ in $(seq 1 100); do
  LS_MOCK_LLM_URL="$(sed -n 's/^mock llm listening on \(http:[^ ]*\)$/\1/p' "$WORK/mock-llm.log" | head -1)"
  [ -n "$LS_MOCK_LLM_URL" ] && break
  sleep 0.1
done
[ -n "$LS_MOCK_LLM_URL" ] || { echo "mock llm did not start:" >&2; cat "$WORK/mock-llm.log" >&2; exit 1; }
export LS_MOCK_LLM_URL
echo "== ledgershield compare (mock endpoint $LS_MOCK_LLM_URL)"
env -u OPENAI_API_KEY -u API_BASE_URL "$LS_BIN" compare --model gpt-4o-strong --model gpt-4o-mini --api-base "$LS_MOCK_LLM_URL" \
  --cases CASE-B-001,CASE-D-001 --retries 0 --db "$LS_DB" --out "$WORK/compare.json" >/dev/null

# Start a server on an ephemeral port; prints its URL once it listens.
start_server() {
  local name="$1"; shift
  local log="$WORK/$name.log"
  ADMIN_API_KEY="$LS_OPERATOR_KEY" LEDGERSHIELD_DB_PATH="$LS_DB" "$LS_BIN" serve --host 127.0.0.1 --port 0 "$@" >"$log" 2>&1 &
  echo "$!" >"$WORK/$name.pid"
  for _ in $(seq 1 100); do
    local url
    url="$(sed -n 's/^LedgerShield listening on \(http:[^ ]*\)$/\1/p' "$log" | head -1)"
    # The line is printed once the listener is bound: connections queue from then on.
    if [ -n "$url" ]; then
      echo "$url"
      return 0
    fi
    sleep 0.2
  done
  echo "server did not start:" >&2
  cat "$log" >&2
  return 1
}

LS_URL="$(start_server controlbench)"
LS_AUDIT_URL="$(start_server audit --env audit)"
# A third server in instrumented mode (SPRT, tool rankings and reward machine in observations).
LS_INSTRUMENTED_URL="$(LEDGERSHIELD_TRACK_MODE=instrumented start_server instrumented)"
# The tests read the servers' startup lines from their logs.
LS_LOG_DIR="$WORK"
# The HTML report the report run wrote (report.spec.mjs opens it from disk).
LS_REPORT_DIR="$WORK/report"
export LS_URL LS_AUDIT_URL LS_INSTRUMENTED_URL LS_LOG_DIR LS_REPORT_DIR
echo "== browser tests (ControlBench $LS_URL, audit $LS_AUDIT_URL, instrumented $LS_INSTRUMENTED_URL)"
if [ "${LS_UPDATE_SCREENSHOTS:-0}" != "1" ]; then
  export LS_SCREENSHOT_DIR="${LS_SCREENSHOT_DIR:-$PWD/target/ui-screenshots}"
  mkdir -p "$LS_SCREENSHOT_DIR"
fi
(cd ui-tests && npx playwright test)
# Nothing tracked may change under a test run (the screenshots used to be rewritten in place).
if [ "${LS_UPDATE_SCREENSHOTS:-0}" != "1" ] && git rev-parse --git-dir >/dev/null 2>&1; then
  dirty="$(git status --porcelain -- docs/screenshots)"
  if [ -n "$dirty" ]; then
    echo "browser tests changed tracked screenshots:" >&2
    echo "$dirty" >&2
    exit 1
  fi
  echo "screenshots written to $LS_SCREENSHOT_DIR; docs/screenshots/ unchanged"
fi
