"""``pipeline``: the whole CPU pipeline with a locally built model, one command.

collect → build-model → SFT (loss CSV, reward checkpoints on the held-out split) → GRPO with a
plan reward → GRPO through ``environment_factory`` → self-play + DPO → evaluate/compare against
random, naive-PAY, always-escalate and the teacher → plots. Writes ``training_metrics.json``,
``loss_history.csv``, ``reward_eval_history.csv``, ``policy_matrix.csv``/``.json`` and the PNGs
into ``--out``.

Presets: ``ci`` (a tiny model, a few steps of each stage, the smoke test's checks) and ``scratch``
(a small model trained from scratch on teacher steps over thousands of generated cases, within
about 25 minutes on two CPU threads; the RL stages run a few steps on top).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Dict, Optional

PRESETS: Dict[str, Dict[str, Any]] = {
    "ci": {"suites": ["public"], "size": "tiny", "sft_steps": 12, "sft_minutes": 0.0, "sft_rows": 0, "lr": 3e-3, "batch": 2,
           "eval_cases": 3, "reward_cases": 2, "eval_every": 0, "max_new_tokens": 48, "grpo_steps": 2, "grpo_len": 48, "rl_cases": 2,
           "candidates": 2, "dpo_steps": 2},
    "scratch": {"suites": ["public", "holdout:1-5", "quarter:1-20"], "size": "small", "sft_steps": 100000, "sft_minutes": 11.0,
                "sft_rows": 2500, "lr": 2e-3, "batch": 4, "eval_cases": 10, "reward_cases": 3, "eval_every": 0,
                "max_new_tokens": 512, "grpo_steps": 2, "grpo_len": 128, "rl_cases": 2, "candidates": 2, "dpo_steps": 2},
}


def pipeline(binary: str, out: Path, preset: str = "ci", threads: int = 2, overrides: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    import torch

    from .collect import collect, pick_eval_cases
    from .dpo import dpo, selfplay
    from .evaluate import compare
    from .grpo import grpo, plan_rows
    from .modelserver import HFPolicy
    from .plot import plot
    from .sft import sft
    from .tiny import build_model

    torch.set_num_threads(threads)
    cfg = dict(PRESETS[preset], **{k: v for k, v in (overrides or {}).items() if v is not None})
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data"
    timings: Dict[str, float] = {}
    t0 = time.monotonic()

    def mark(stage: str) -> None:
        timings[stage] = round(time.monotonic() - t0 - sum(timings.values()), 1)

    info = collect(binary, data, cfg["suites"])
    mark("collect")
    build = build_model(out / "base_model", [data / "steps_train.jsonl", data / "sft_train.jsonl"], size=cfg["size"])
    mark("build_model")
    cases = pick_eval_cases(json.loads((data / "eval_cases.json").read_text()), cfg["eval_cases"])
    reward_cases = cases[: cfg["reward_cases"]]

    def eval_fn(model: Any, tok: Any) -> Dict[str, Any]:
        from .evaluate import metrics, play_model

        pol = HFPolicy(model, tok, max_new_tokens=cfg["max_new_tokens"])
        return metrics("sft", "local/sft", play_model(binary, pol, "local/sft", reward_cases, out / "runs.db", max_tokens=cfg["max_new_tokens"]))

    sft_sum = sft(str(out / "base_model"), [data / "steps_train.jsonl"], out / "sft", ["steps"], max_steps=cfg["sft_steps"],
                  lr=cfg["lr"], batch_size=cfg["batch"], eval_every=cfg["eval_every"], eval_fn=eval_fn, threads=threads,
                  max_minutes=cfg["sft_minutes"], max_rows=cfg["sft_rows"])
    for name in ("loss_history.csv", "reward_eval_history.csv"):
        shutil.copy(out / "sft" / name, out / name)
    mark("sft")
    sft_model = sft_sum["model_dir"]
    split = json.loads((data / "split.json").read_text())
    public_train = {b for b in split["train_base_cases"] if b.startswith("CASE-")}
    rl_rows = plan_rows(data / "sft_train.jsonl", public_train)[: cfg["rl_cases"]]
    # GRPO and self-play run in process (no server); collection and evaluation use the binary.
    url = None  # in process
    g_plan = grpo(sft_model, url, out / "grpo_plan", "plan", rl_rows, max_steps=cfg["grpo_steps"],
                  max_completion_length=cfg["grpo_len"], threads=threads)
    mark("grpo_plan")
    g_tools = grpo(sft_model, url, out / "grpo_tools", "tools", rl_rows, max_steps=cfg["grpo_steps"],
                   max_completion_length=cfg["grpo_len"], threads=threads)
    mark("grpo_tools")
    sp = selfplay(sft_model, url, rl_rows, out / "dpo", candidates=cfg["candidates"], max_new_tokens=cfg["grpo_len"], threads=threads)
    d = dpo(sft_model, out / "dpo" / "pairs.jsonl", out / "dpo", max_steps=cfg["dpo_steps"], threads=threads) if sp["pairs"] else None
    mark("selfplay_dpo")
    models = {"sft": HFPolicy.load(sft_model, max_new_tokens=cfg["max_new_tokens"])}
    rows = compare(binary, cases, out / "runs.db", out, ["random", "naive-pay", "always-escalate", "teacher"], models,
                   max_tokens=cfg["max_new_tokens"])
    mark("evaluate")
    plots = plot(out)
    mark("plot")
    losses = [r["loss"] for r in _read_loss(out / "loss_history.csv")]
    metrics = {
        "preset": preset, "config": cfg, "threads": threads, "collect": info, "model": build, "sft": {k: v for k, v in sft_sum.items() if k != "reward_checkpoints"},
        "reward_checkpoints": sft_sum["reward_checkpoints"],
        "grpo_plan": {k: g_plan[k] for k in ("steps", "rollouts_graded", "rollouts_expected", "mean_reward", "all_finite")},
        "grpo_tools": {k: g_tools[k] for k in ("steps", "rollouts_graded", "rollouts_expected", "mean_reward", "all_finite")},
        "selfplay": sp, "dpo": ({k: d[k] for k in ("pairs", "steps", "losses", "all_finite")} if d else None),
        "policy_matrix": [{k: v for k, v in r.items() if k != "per_case"} for r in rows],
        "eval_cases": cases, "plots": plots, "timings_s": timings,
        "checks": {
            "loss_finite": all(math.isfinite(x) for x in losses),
            "loss_fell": bool(losses) and min(losses[-3:]) < losses[0],
            "every_rollout_graded": g_plan["rollouts_graded"] == g_plan["rollouts_expected"] and g_tools["rollouts_graded"] == g_tools["rollouts_expected"],
            "every_eval_episode_played": all(r["episodes"] == len(cases) for r in rows),
        },
    }
    (out / "training_metrics.json").write_text(json.dumps(metrics, indent=1, default=str))
    return metrics


def _read_loss(path: Path) -> list:
    import csv

    with open(path) as f:
        return [{"loss": float(r["loss"])} for r in csv.DictReader(f)]
