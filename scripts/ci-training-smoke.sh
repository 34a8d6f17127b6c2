#!/usr/bin/env bash
# CI smoke for the training pipeline: the compact LM's torch tests, the stock RL libraries' tests
# (SB3, sb3-contrib), then, on the task distribution's splits (train draws, validation draws for
# the choices, the test templates and the test generator held out): the teacher on 80 train draws
# -> collect (curated, split by template) -> SFT -> GRPO (plan reward and environment_factory)
# -> self-play + DPO -> evaluate -> structured policy (behaviour cloning + RL over 2 seeds) beside
# the scripted baselines, the teacher and the lookup table -> constrained evaluation of every LM
# checkpoint -> plots, with a tiny model built locally (no download). Its checks can fail: the
# loss must fall, the trained policy must beat the best scripted baseline on the test episodes by
# 0.3 (macro means per held-out template and generator) with parse success >= 0.9, RL groups must
# have reward variance, every rollout is graded and every checkpoint evaluated (the pipeline exits
# 1 when one fails; `python/tests/test_structured.py` checks that `--lr 0` fails).
#
# The training virtual environment (torch, transformers, trl, ...: several GB) is created once
# per machine at $LEDGERSHIELD_TRAIN_VENV (default ~/.cache/ledgershield/train-venv, outside
# the repository) and reused while python/pyproject.toml's `train` pins are unchanged.
#
#   LEDGERSHIELD_BIN         server binary (default: <repo>/target/debug/ledgershield)
#   LEDGERSHIELD_TRAIN_VENV  training venv directory
#   LEDGERSHIELD_SKIP_TRAINING_SMOKE=1  skip (prints why)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
if [ "${LEDGERSHIELD_SKIP_TRAINING_SMOKE:-0}" = "1" ]; then
    echo "training smoke skipped (LEDGERSHIELD_SKIP_TRAINING_SMOKE=1)"
    exit 0
fi
VENV="${LEDGERSHIELD_TRAIN_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ledgershield/train-venv}"
BIN="${LEDGERSHIELD_BIN:-$REPO/target/debug/ledgershield}"
PYTHON="${PYTHON:-python3}"
[ -x "$BIN" ] || (cd "$REPO" && cargo build -p ledgershield)

# Reinstall the pinned set only when the pins change.
PINS="$(sed -n '/^train = \[/,/^\]/p' "$REPO/python/pyproject.toml")"
STAMP="$(printf '%s' "$PINS" | sha256sum | cut -c1-16)"
if [ ! -f "$VENV/.train-pins-$STAMP" ]; then
    echo "== training venv: installing the pinned train extra into $VENV (one time per machine)"
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
    start=$(date +%s)
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "$REPO/python[train]"
    echo "installed in $(( $(date +%s) - start )) s"
    touch "$VENV/.train-pins-$STAMP"
fi
# The package itself: always the checkout's (no dependency resolution).
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --no-deps --force-reinstall "$REPO/python"

# The compact LM's tests that need torch (the main Python suite's venv has none, so it skips them):
# SFT, constrained decoding, the RL update's batched log-probabilities and clipped steps.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "pytest>=7"
(cd "$REPO/python/tests" && LEDGERSHIELD_BIN="$BIN" "$VENV/bin/pytest" -q -p no:cacheprovider test_compact_lm.py) \
    || { echo "compact LM tests failed in the training venv" >&2; exit 1; }
# The training evidence pack: TensorBoard event files of every stage from the committed results,
# read back, and the notebook over them executed.
(cd "$REPO/python/tests" && LEDGERSHIELD_BIN="$BIN" "$VENV/bin/pytest" -q -p no:cacheprovider test_training_evidence.py) \
    || { echo "training evidence tests failed in the training venv" >&2; exit 1; }

# Stock RL libraries, unmodified, against the environments: SB3 (PPO, make_vec_env, the RustVecEnv
# adapter), sb3-contrib's MaskablePPO and the docs' SB3 examples (the `rl` extra's pins, installed
# on top of the train extra's torch; reinstalled only when those pins change).
RL_PINS="$(sed -n 's/^rl = \[\(.*\)\]$/\1/p' "$REPO/python/pyproject.toml" | tr -d '",')"
[ -n "$RL_PINS" ] || { echo "no rl extra in python/pyproject.toml" >&2; exit 1; }
RL_STAMP="$(printf '%s' "$RL_PINS" | sha256sum | cut -c1-16)"
if [ ! -f "$VENV/.rl-pins-$RL_STAMP" ]; then
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir $RL_PINS
    touch "$VENV/.rl-pins-$RL_STAMP"
fi
start=$(date +%s)
(cd "$REPO/python/tests" && LEDGERSHIELD_BIN="$BIN" "$VENV/bin/pytest" -q -p no:cacheprovider -W ignore \
    test_sb3.py test_docs_examples.py -k "sb3") \
    || { echo "stable-baselines3 / sb3-contrib tests failed in the training venv" >&2; exit 1; }
echo "SB3 tests finished in $(( $(date +%s) - start )) s"

# The stock-RL script on the structured interface (sb3-contrib MaskablePPO after behaviour cloning),
# sized to a smoke: it must run end to end, play every baseline (the lookup table and the teacher
# included) on the held-out template and generator sets, and write its results.
start=$(date +%s)
PPO_OUT="$(mktemp -d)"
(cd "$PPO_OUT" && LEDGERSHIELD_BIN="$BIN" "$VENV/bin/python" -m ledgershield.training.factored_ppo --out "$PPO_OUT/run" \
    --skip-scratch --seeds 1 --demos 8 --bc-epochs 1 --bc-minutes 0.05 --val-every 256 --val-episodes 3 \
    --test-episodes 4 --n-envs 2 --n-steps 64 --batch-size 64 --threads 1 > "$PPO_OUT/log" 2>&1) \
    || { tail -30 "$PPO_OUT/log"; echo "factored_ppo smoke failed" >&2; exit 1; }
"$VENV/bin/python" - "$PPO_OUT/run/results.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
need = {"random", "naive-pay", "always-escalate", "checklist-pay", "lookup-table", "teacher"}
assert need <= set(r["baselines"]), sorted(r["baselines"])
assert r["bc_pairs"] > 0 and r["runs"]["bc"] and r["runs"]["bc_ppo"], r["runs"]
for name, b in r["baselines"].items():
    assert 0.0 <= b["held_out_templates"] <= 1.0 and 0.0 <= b["held_out_generators"] <= 1.0, (name, b)
print("PASS factored_ppo smoke:", {k: (v["held_out_templates"], v["held_out_generators"]) for k, v in r["baselines"].items()})
PY
rm -rf "$PPO_OUT"
echo "factored_ppo smoke finished in $(( $(date +%s) - start )) s"

OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
cd "$OUT"
start=$(date +%s)
LEDGERSHIELD_TRAIN_THREADS="${LEDGERSHIELD_TRAIN_THREADS:-2}" TRL_EXPERIMENTAL_SILENCE=1 \
    "$VENV/bin/python" -m ledgershield.training --bin "$BIN" pipeline --preset ci --out "$OUT/run" > "$OUT/pipeline.log" 2>&1 \
    || { tail -50 "$OUT/pipeline.log"; echo "training pipeline failed" >&2; exit 1; }
echo "pipeline finished in $(( $(date +%s) - start )) s"
"$VENV/bin/python" - "$OUT/run" <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
m = json.loads((run / "training_metrics.json").read_text())
required = ["training_metrics.json", "tensorboard", "loss_history.csv", "reward_eval_history.csv", "policy_matrix.csv", "policy_matrix.json",
            "structured_matrix.json", "structured_curve.csv", "structured_rl_history.csv", "ladder.json",
            "loss_curve.png", "reward_checkpoints.png", "policy_ladder.png", "per_case_scores.png", "score_vs_unsafe.png", "result_classes.png",
            "ladder_ci.png", "per_family.png", "bc_curve.png", "rl_curve.png"]
checks = dict(m["checks"])
checks["outputs_written"] = all((run / f).exists() for f in required)
checks["dpo_ran"] = bool(m["dpo"]) and m["dpo"]["all_finite"]
checks["ladder_has_lookup_table"] = any(r["policy"] == "lookup-table" for r in m["headline"])
checks["teacher_beats_naive_pay"] = {r["policy"]: r["mean_score"] for r in m["policy_matrix"]}["teacher"] > {r["policy"]: r["mean_score"] for r in m["policy_matrix"]}["naive-pay"]
for name, ok in checks.items():
    print(f"{'PASS' if ok else 'FAIL'} {name}")
st = m["structured"]
print(f"structured policy: test macro {st['bc_held_out']} {st['bc_ci95']} on {st['held_out_episodes']} episodes, best scripted {st['best_scripted']}, "
      f"RL over {st['rl']['seeds']} seeds {st['rl']['held_out_means']}")
for r in m["headline"]:
    print(f"  {r['policy']:<28} macro {r['macro']} {r['macro_ci95']} (templates {r['macro_templates']}, generator {r['macro_generators']}), mean {r['mean_score']}")
print("timings:", m["timings_s"], "process CPU s:", m["process_cpu_s"], "load:", m["load_average"])
failed = sum(not ok for ok in checks.values())
print(f"training smoke: {len(checks) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
# Every documented block that needs torch/TRL (the GRPO examples of TRAINING.md and docs/python.md,
# sized for a CPU, and TRAINING.md's audit GRPO), run as written by the snippet test.
(cd "$REPO/python/tests" && TRL_EXPERIMENTAL_SILENCE=1 LEDGERSHIELD_BIN="$BIN" "$VENV/bin/pytest" -q -p no:cacheprovider test_doc_snippets.py -k trl) \
    || { echo "documented torch/TRL blocks failed in the training venv" >&2; exit 1; }
echo "PASS documented GRPO blocks (CPU)"
