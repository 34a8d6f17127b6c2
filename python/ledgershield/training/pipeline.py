"""``pipeline``: the whole CPU pipeline, one command, on the task distribution's splits.

Data (:mod:`.tasks`): the teacher (the Rust agent, in process) plays ``train_episodes`` draws of
the **train** set (train templates x train generators); every policy is trained on those
episodes only, every choice (the behaviour-cloning epoch count, the compact LM's SFT checkpoint,
the selected RL run) is made on the **validation** episodes (validation templates; the
validation generator), and every policy is reported once on the **test** episodes (test
templates; the test generator). Headline figures are **macro means**: the mean per held-out
template and per held-out generator, then their mean (:func:`.tasks.report`), with the
per-template and per-generator tables and a 95 % bootstrap interval.

Stages: teacher data → the structured policy (:mod:`.structured`: behaviour cloning, then
group-relative RL over several seeds, each on training draws of its own) beside the scripted
baselines, the teacher and the lookup table (:mod:`.lookup`) → in ``scratch`` the compact-interface
language model (:mod:`.compact_lm`: SFT from random weights, step-limited, then GRPO over three
seeds with the terminal score and with the dense step rewards) → plots. ``ci`` runs the Hugging
Face path instead (a tiny model on the ledger prompt: SFT, GRPO with a plan reward and through
``environment_factory``, self-play + DPO, free generation through the ``llm`` agent on the
curated test templates, candidate-constrained evaluation on test draws), a few steps each.

The checks can fail, and ``pipeline`` exits non-zero when one does: the SFT loss must fall (the
mean of its last three logged losses at most 0.9 of the first three), the trained policy must beat
the best scripted baseline on the test episodes by ``margin`` (macro means), its parse success
(under its candidate constraint) must reach ``min_parse``, every RL seed must have groups with
reward variance, every GRPO rollout must be graded and every checkpoint (SFT, GRPO plan, GRPO
tools, DPO) must be evaluated on the same held-out episodes. ``--lr`` scales every stage's
learning rate (``--lr 0`` trains nothing, and fails).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import tasks

PRESETS: Dict[str, Dict[str, Any]] = {
    "ci": {"suites": ["public"], "size": "tiny", "sft_steps": 12, "sft_minutes": 0.0, "sft_rows": 0, "lr": 3e-3, "batch": 2,
           "eval_cases": 3, "reward_cases": 2, "eval_every": 0, "max_new_tokens": 48, "grpo_steps": 2, "grpo_len": 48, "rl_cases": 2,
           "candidates": 2, "dpo_steps": 2, "grpo_temperature": 1.5,
           "train_episodes": 80, "validation_episodes": 6, "test_episodes": 12,
           "bc_lr": 0.05, "bc_epochs": 60, "bc_checkpoints": [], "rl_seeds": 2, "rl_iterations": 2, "rl_batch": 4, "rl_group": 4,
           "rl_temperature": 1.0, "rl_lr": 0.2, "rl_episodes": 40, "margin": 0.3, "min_parse": 0.9, "cap_to_targets": False, "lm_eval_cases": 1,
           "hf_lm": True, "compact_lm": False},
    # The language model of the scratch run is the compact-interface transformer (.compact_lm).
    "scratch": {"train_episodes": 400, "validation_episodes": 24, "test_episodes": 60, "lr": 3e-3,
                "bc_lr": 0.05, "bc_epochs": 60, "bc_checkpoints": [10, 40], "rl_seeds": 3, "rl_iterations": 4, "rl_batch": 8, "rl_group": 4,
                "rl_temperature": 1.0, "rl_lr": 0.2, "rl_episodes": 200, "margin": 0.3, "min_parse": 0.95, "min_lm_score": 0.5,
                "hf_lm": False, "compact_lm": True,
                # SFT is step-limited (the same on any machine): 3,000 steps of batch 16 on a
                # 4,500-step cosine; its checkpoint is chosen on the validation episodes among
                # the probe points (every 600 steps).
                "compact": {"lr": 3e-3, "minutes": 0.0, "max_steps": 3000, "schedule_steps": 4500, "batch": 16, "dim": 96, "layers": 3, "heads": 4,
                            "sft_evals": 5,
                            # SFT spreads 0.1 of each target over the vocabulary: a fully confident policy
                            # leaves most RL groups without reward variance (measured 67-91 % of them)
                            "label_smoothing": 0.1,
                            # GRPO from the chosen SFT checkpoint: per seed its own training draws, with the
                            # terminal score and with the dense step rewards (the same draws, paired)
                            "rl": {"seeds": 3, "rewards": ["score", "dense"], "iterations": 32, "group": 6, "batch": 8, "temperature": 1.0,
                                   "lr": 3e-4, "episodes": 300,
                                   # a group whose rewards differ by a rounding-sized amount does not weigh as
                                   # much as one whose outcomes differ
                                   "adv_floor": 0.1,
                                   # two jobs at once (one process each, single-threaded): two cores
                                   "parallel": 2},
                            # one torch thread: on a shared 2-core machine two threads spin-wait (measured 8x slower per step)
                            "threads": 1}},
}


def teacher_data(out: Path, n: int) -> Dict[str, Any]:
    """The teacher on ``n`` draws of the train set, in process: ``out/teacher_train.json`` (each
    episode's reset, trajectory with its dense rewards, score and origin) and a summary."""
    out.mkdir(parents=True, exist_ok=True)
    recs = []
    for ep in tasks.episodes("train", n):
        r = tasks.play_agent("teacher", ep, record=True)
        recs.append(dict(r, reset=ep["reset"]))
    (out / "teacher_train.json").write_text(json.dumps(recs))
    kept = [r for r in recs if r["trajectory"] and r["trajectory"][-1]["action_type"] == "submit_decision"]
    by_gen: Dict[str, int] = {}
    for r in recs:
        by_gen[r["generator"]] = by_gen.get(r["generator"], 0) + 1
    return {"set": "train", "episodes_recorded": len(recs), "episodes_kept": len(kept), "train_rows": sum(r["steps"] for r in kept),
            "teacher_mean_score": round(sum(r["final_score"] for r in recs) / max(len(recs), 1), 4),
            "templates": len({r["template"] for r in recs}), "generators": by_gen, "records": kept}


def pipeline(binary: str, out: Path, preset: str = "ci", threads: int = 2, overrides: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    import torch

    from .plot import plot

    torch.set_num_threads(threads)
    cfg = dict(PRESETS[preset], **{k: v for k, v in (overrides or {}).items() if v is not None})
    if (overrides or {}).get("lr") is not None:
        cfg["bc_lr"] = PRESETS[preset]["bc_lr"] * cfg["lr"] / PRESETS[preset]["lr"]
    if cfg.get("compact_lm"):
        cfg["compact"] = dict(cfg["compact"])
        if (overrides or {}).get("sft_minutes") is not None:
            cfg["compact"]["minutes"] = float(overrides["sft_minutes"])
        if (overrides or {}).get("sft_steps") is not None:
            cfg["compact"]["max_steps"] = int(overrides["sft_steps"])
    cpu0 = time.process_time()
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data"
    timings: Dict[str, float] = {}
    t0 = time.monotonic()

    def mark(stage: str) -> None:
        timings[stage] = round(time.monotonic() - t0 - sum(timings.values()), 1)

    teacher = teacher_data(data, int(cfg["train_episodes"]))
    train_recs = teacher.pop("records")
    validation = tasks.held_out("validation", int(cfg["validation_episodes"]))
    test = tasks.held_out("test", int(cfg["test_episodes"]))
    mark("teacher_data")
    hf = _hf_stages(binary, out, data, cfg, threads, train_recs, mark) if cfg["hf_lm"] else None
    from .structured import structured_stage

    st_args = (out, train_recs, validation, test)
    st_kw = dict(lr=cfg["bc_lr"], epochs=cfg["bc_epochs"], checkpoints=cfg["bc_checkpoints"], rl_seeds=cfg["rl_seeds"],
                 rl_iterations=cfg["rl_iterations"], rl_group=cfg["rl_group"], rl_batch=cfg["rl_batch"],
                 rl_temperature=cfg["rl_temperature"], rl_lr=cfg["rl_lr"], rl_episodes=cfg["rl_episodes"])
    cl = None
    if cfg["compact_lm"]:
        # The structured stage runs in a second process beside the compact LM (both single-threaded:
        # two cores), on the same episodes.
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as ex:
            st_future = ex.submit(structured_stage, *st_args, **st_kw)
            cl = _compact_stage(out, cfg, preset, threads, train_recs, validation, test)
            mark("compact_lm")
            st = st_future.result()
        assert st["held_out_ids"] == [tasks.key(e) for e in test], "the compact LM and the structured policy were scored on different episodes"
    else:
        st = structured_stage(*st_args, **st_kw)
        mark("structured")
    ladder = json.loads((out / "structured_matrix.json").read_text())
    lm_rows: list = []
    if hf is not None:
        from .constrained import evaluate_lm

        lm_eps = _first_per_set(test, cfg["lm_eval_cases"])
        lm_rows = [evaluate_lm(path, f"{name} (constrained)", lm_eps, hf["system"]) for name, path in hf["ckpts"].items()]
        mark("lm_constrained_eval")
    if cl is not None:
        _write_compact_curves(out, cl)
    ladder += lm_rows + (cl["matrix"] if cl else [])
    (out / "ladder.json").write_text(json.dumps(ladder, indent=1))
    plots = plot(out)
    mark("plot")
    losses = [r["loss"] for r in _read_loss(out / "loss_history.csv")]
    metrics: Dict[str, Any] = {"preset": preset, "config": cfg, "threads": threads, "collect": teacher, "splits": _splits_info(validation, test),
                               "structured": st, "lm_constrained": [{k: v for k, v in r.items() if k not in ("per_case", "per_episode")} for r in lm_rows],
                               "compact_lm": cl, "plots": plots, "headline": headline(ladder)}
    chk = dict(structured_checks(cfg, st), loss_finite=bool(losses) and all(math.isfinite(x) for x in losses),
               loss_fell=len(losses) >= 6 and sum(losses[-3:]) / 3 <= 0.9 * sum(losses[:3]) / 3)
    if hf is not None:
        metrics.update(hf["metrics"])
        chk.update(checks(cfg, losses, hf["g_plan"], hf["g_tools"], hf["rows"], hf["cases"], st, bool(hf["d"])))
        chk["every_checkpoint_evaluated"] = len(lm_rows) == len(hf["ckpts"]) == 3 + bool(hf["d"]) and all(r["episodes"] == len(lm_eps) > 0 for r in lm_rows)
    if cl is not None:
        chk.update(compact_checks(cfg, cl, st))
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    metrics.update(timings_s=timings, process_cpu_s=round(time.process_time() - cpu0, 1),
                   children_cpu_s=round(children.ru_utime + children.ru_stime, 1), wall_s=round(time.monotonic() - t0, 1),
                   structured_wall_s=st["wall_s"], structured_cpu_s=st["cpu_s"], structured_in_parallel=bool(cfg["compact_lm"]),
                   load_average=_loadavg(), checks=chk)
    (out / "training_metrics.json").write_text(json.dumps(metrics, indent=1, default=str))
    # TensorBoard event files of every stage, from what the stages recorded (tb_events.py).
    from .tb_events import write_events

    metrics["tensorboard"] = write_events(out)
    chk["tensorboard_every_stage"] = all(metrics["tensorboard"].get(s, 0) > 0 for s in tb_stages(cfg))
    (out / "training_metrics.json").write_text(json.dumps(metrics, indent=1, default=str))
    return metrics


def _first_per_set(test: List[Dict[str, Any]], n: int) -> List[Dict[str, Any]]:
    """Up to ``n`` test episodes, alternating between the template and the generator set."""
    a, b = ([e for e in test if e["set"] == s] for s in tasks.HELD_OUT["test"])
    mixed = [e for pair in zip(a, b) for e in pair]
    return mixed[:n]


def _splits_info(validation: List[Dict[str, Any]], test: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"sets": tasks.SETS, "seed_bases": tasks.SEED_BASES, "rl_seed_offset": tasks.RL_SEED_OFFSET,
            "validation_episodes": len(validation), "test_episodes": len(test)}


def headline(ladder: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Each policy's test figures: the macro mean (per held-out template and per held-out
    generator, averaged) with its interval, the two macro parts, the plain mean, parse success
    and unsafe release."""
    keys = ("policy", "episodes", "macro", "macro_ci95", "macro_templates", "macro_generators", "mean_score", "parse_success",
            "unsafe_release_rate", "per_template", "per_generator")
    return [{k: r.get(k) for k in keys} for r in ladder]


def tb_stages(cfg: Dict[str, Any]) -> list:
    """The stage directories a run of this configuration must have event files in."""
    stages = ["collect", "structured", "pipeline"]
    if cfg.get("hf_lm"):
        stages += ["sft", "grpo_plan", "grpo_tools", "selfplay_dpo", "evaluate", "lm_constrained"]
    if cfg.get("compact_lm"):
        stages += ["compact_lm"]
    return stages


def _hf_stages(binary: str, out: Path, data: Path, cfg: Dict[str, Any], threads: int, train_recs: List[Dict[str, Any]], mark: Any) -> Dict[str, Any]:
    """The Hugging Face model path: the curated cases' teacher runs (``collect``, split by
    template: the system prompt, plan rows of the training templates, free generation on the
    test templates), ledger rows of the training draws, a random-weight Qwen2-shaped model and
    BPE tokenizer, TRL SFT, GRPO (plan and tools), self-play + DPO, free-generation evaluation."""
    from transformers import AutoTokenizer

    from .collect import collect, pick_eval_cases
    from .constrained import ledger_rows, system_prompt
    from .dpo import dpo, selfplay
    from .evaluate import compare
    from .grpo import grpo, plan_rows
    from .modelserver import HFPolicy
    from .sft import sft
    from .tiny import build_model

    info = collect(binary, data, cfg["suites"], split_by="templates")
    system = system_prompt(data / "steps_train.jsonl")
    mark("collect")
    ledger_rows(train_recs, data / "steps_ledger_train.jsonl", system)
    mark("ledger_rows")
    build = build_model(out / "base_model", [data / "steps_train.jsonl", data / "steps_ledger_train.jsonl", data / "sft_train.jsonl"], size=cfg["size"])
    rows_info = ledger_rows(train_recs, data / "steps_ledger_train.jsonl", system, AutoTokenizer.from_pretrained(out / "base_model"))
    # Generation and training lengths at least the longest target / row (measured, in tokens).
    cfg["max_new_tokens"] = max(cfg["max_new_tokens"], rows_info["target_max"] + 8) if cfg["cap_to_targets"] else cfg["max_new_tokens"]
    cfg["max_length"] = min(rows_info["prompt_max"] + rows_info["target_max"] + 64, 8192)
    mark("build_model")
    cases = pick_eval_cases(json.loads((data / "eval_cases.json").read_text()), cfg["eval_cases"])
    reward_cases = cases[: cfg["reward_cases"]]

    def eval_fn(model: Any, tok: Any) -> Dict[str, Any]:
        from .evaluate import metrics, play_model

        pol = HFPolicy(model, tok, max_new_tokens=cfg["max_new_tokens"])
        return metrics("sft", "local/sft", play_model(binary, pol, "local/sft", reward_cases, out / "runs.db", max_tokens=cfg["max_new_tokens"]))

    sft_sum = sft(str(out / "base_model"), [data / "steps_ledger_train.jsonl"], out / "sft", ["steps"], max_steps=cfg["sft_steps"],
                  lr=cfg["lr"], batch_size=cfg["batch"], eval_every=cfg["eval_every"], eval_fn=eval_fn, threads=threads,
                  max_minutes=cfg["sft_minutes"], max_rows=cfg["sft_rows"], max_length=cfg["max_length"])
    for name in ("loss_history.csv", "reward_eval_history.csv"):
        shutil.copy(out / "sft" / name, out / name)
    mark("sft")
    sft_model = sft_sum["model_dir"]
    train_templates = {c for c, sp in tasks.template_splits().items() if sp == "train"}
    rl_rows = plan_rows(data / "sft_train.jsonl", train_templates)[: cfg["rl_cases"]]
    # GRPO and self-play run in process (no server); collection and evaluation use the binary.
    url = None  # in process
    g_plan = grpo(sft_model, url, out / "grpo_plan", "plan", rl_rows, max_steps=cfg["grpo_steps"],
                  max_completion_length=cfg["grpo_len"], temperature=cfg["grpo_temperature"], threads=threads)
    mark("grpo_plan")
    g_tools = grpo(sft_model, url, out / "grpo_tools", "tools", rl_rows, max_steps=cfg["grpo_steps"],
                   max_completion_length=cfg["grpo_len"], temperature=cfg["grpo_temperature"], threads=threads)
    mark("grpo_tools")
    sp = selfplay(sft_model, url, rl_rows, out / "dpo", candidates=cfg["candidates"], max_new_tokens=cfg["grpo_len"], threads=threads)
    d = dpo(sft_model, out / "dpo" / "pairs.jsonl", out / "dpo", max_steps=cfg["dpo_steps"], threads=threads) if sp["pairs"] else None
    mark("selfplay_dpo")
    # Free generation through the Rust llm agent: the SFT checkpoint on the curated test templates
    # (every checkpoint is scored under candidate-constrained decoding on test draws afterwards).
    models = {"sft": HFPolicy.load(sft_model, max_new_tokens=cfg["max_new_tokens"])}
    rows = compare(binary, cases, out / "runs.db", out, ["random", "naive-pay", "always-escalate", "teacher"], models,
                   max_tokens=cfg["max_new_tokens"])
    mark("evaluate")
    ckpts = {"lm-sft": sft_model, "lm-grpo-plan": g_plan["model_dir"], "lm-grpo-tools": g_tools["model_dir"]}
    if d:
        ckpts["lm-dpo"] = d["model_dir"]
    grpo_std = {name: [h.get("reward_std") for h in g["history"] if "reward_std" in h] for name, g in (("plan", g_plan), ("tools", g_tools))}
    metrics = {"model": build, "curated_collect": info, "sft": {k: v for k, v in sft_sum.items() if k != "reward_checkpoints"},
               "reward_checkpoints": sft_sum["reward_checkpoints"],
               "grpo_plan": {k: g_plan[k] for k in ("steps", "rollouts_graded", "rollouts_expected", "mean_reward", "all_finite")},
               "grpo_tools": {k: g_tools[k] for k in ("steps", "rollouts_graded", "rollouts_expected", "mean_reward", "all_finite")},
               "selfplay": sp, "dpo": ({k: d[k] for k in ("pairs", "steps", "losses", "all_finite")} if d else None),
               "policy_matrix": [{k: v for k, v in r.items() if k != "per_case"} for r in rows], "grpo_reward_std": grpo_std,
               "ledger_rows": rows_info, "eval_cases": cases}
    return {"metrics": metrics, "g_plan": g_plan, "g_tools": g_tools, "d": d, "rows": rows, "cases": cases, "ckpts": ckpts, "system": system}


def _compact_stage(out: Path, cfg: Dict[str, Any], preset: str, threads: int, train_recs: List[Dict[str, Any]],
                   validation: List[Dict[str, Any]], test: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The compact-interface LM (:mod:`.compact_lm`) on the same episodes."""
    from .compact_lm import compact_lm_stage

    c = cfg["compact"]
    scale = cfg["lr"] / PRESETS[preset]["lr"]
    rl = dict(c["rl"], lr=c["rl"]["lr"] * scale) if c.get("rl") else None
    return compact_lm_stage(out / "compact_lm", train_recs, validation, test, lr=c["lr"] * scale, minutes=c["minutes"], max_steps=c["max_steps"],
                            batch=c["batch"], dim=c["dim"], layers=c["layers"], heads=c["heads"], sft_evals=c.get("sft_evals", 5),
                            threads=c.get("threads") or threads, label_smoothing=c.get("label_smoothing", 0.0),
                            schedule_steps=c.get("schedule_steps", 0), rl=rl)


def _write_compact_curves(out: Path, cl: Dict[str, Any]) -> None:
    """The compact LM's SFT loss and validation reward checkpoints as the pipeline's curves (the
    scratch preset has no other language model), and its RL history per run."""
    import csv

    with open(out / "loss_history.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "loss", "wall_s"])
        w.writeheader()
        w.writerows(cl["sft_history"])
    with open(out / "reward_eval_history.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "macro", "mean_score", "parse_success", "episodes", "wall_s"], extrasaction="ignore")
        w.writeheader()
        w.writerows([dict(cl["sft_curve_start"], step=0, wall_s=0)] + cl["sft_curve"])
    with open(out / "compact_rl_history.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["run", "reward", "seed", "iteration", "mean_reward", "mean_return", "reward_std", "zero_variance_groups",
                                          "groups", "loss"])
        w.writeheader()
        for i, r in enumerate((cl.get("rl") or {}).get("runs") or []):
            for h in r["history"]:
                w.writerow(dict({k: v for k, v in h.items() if k in w.fieldnames}, run=i, reward=r["reward"], seed=r["seed"]))


def compact_checks(cfg: Dict[str, Any], cl: Dict[str, Any], st: Dict[str, Any]) -> Dict[str, bool]:
    """The language model (compact interface) against the bar of issue item 4: its SFT
    checkpoint beats the best scripted baseline by ``margin`` and scores at least ``min_lm_score``
    held out, with parse success (under constraint) at least ``min_parse``; every RL seed had
    groups with reward variance."""
    best = st["best_scripted"] if st["best_scripted"] is not None else 1.0
    zv = (cl.get("rl") or {}).get("zero_variance_share") or []
    return {"lm_beats_best_scripted": cl["test_episodes"] > 0 and cl["sft_held_out"] >= best + cfg["margin"],
            "lm_reaches_min_score": cl["test_episodes"] > 0 and cl["sft_held_out"] >= cfg.get("min_lm_score", 0.0),
            "lm_parse_success": cl["sft_parse_success_under_constraint"] >= cfg["min_parse"],
            "lm_rl_groups_have_variance": bool(zv) and all(z < 1.0 for z in zv)}


def checks(cfg: Dict[str, Any], losses: list, g_plan: Dict[str, Any], g_tools: Dict[str, Any], rows: list, cases: list,
           st: Dict[str, Any], dpo_ran: bool) -> Dict[str, bool]:
    """The pipeline's checks (each can fail; see the module documentation)."""
    head, tail = losses[:3], losses[-3:]
    evaluated = {r["policy"] for r in rows if r["episodes"] == len(cases)}
    return {
        "loss_finite": bool(losses) and all(math.isfinite(x) for x in losses),
        "loss_fell": len(losses) >= 6 and sum(tail) / len(tail) <= 0.9 * sum(head) / len(head),
        "every_rollout_graded": g_plan["rollouts_graded"] == g_plan["rollouts_expected"] and g_tools["rollouts_graded"] == g_tools["rollouts_expected"],
        "every_eval_episode_played": all(r["episodes"] == len(cases) for r in rows),
        "sft_evaluated_free_generation": "sft" in evaluated,
        **structured_checks(cfg, st),
    }


def structured_checks(cfg: Dict[str, Any], st: Dict[str, Any]) -> Dict[str, bool]:
    """The trained policy against the best scripted baseline, its parse success and RL variance."""
    best = st["best_scripted"] if st["best_scripted"] is not None else 1.0
    return {
        "policy_beats_best_scripted": st["held_out_episodes"] > 0 and st["bc_held_out"] >= best + cfg["margin"],
        "parse_success": st["bc_parse_success_under_constraint"] >= cfg["min_parse"],
        "rl_groups_have_variance": bool(st["rl"]["zero_variance_share"]) and all(z < 1.0 for z in st["rl"]["zero_variance_share"]),
    }


def _loadavg() -> Optional[list]:
    import os

    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _read_loss(path: Path) -> list:
    import csv

    with open(path) as f:
        return [{"loss": float(r["loss"])} for r in csv.DictReader(f)]
