"""Subcommands: collect, build-model, sft, grpo, selfplay, dpo, evaluate, compare, plot,
audit-grpo, audit-eval, pipeline. Every model-using command takes ``--model`` (a hub name on a
box that has one, a local path here)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from .binary import Server, find_binary


def _cases(data: Path, limit: int) -> List[Dict[str, Any]]:
    from .collect import pick_eval_cases

    return pick_eval_cases(json.loads((data / "eval_cases.json").read_text()), limit)


def _public_train_cases(data: Path) -> set:
    """Curated cases of the training split (the ones a server resets by id)."""
    split = json.loads((data / "split.json").read_text())
    train = set(split["train_base_cases"])
    return {b for b in train if b.startswith("CASE-")}


def eval_fn_for(binary: str, cases: List[Dict[str, Any]], db: Path, max_tokens: int) -> Any:
    from .evaluate import metrics, play_model
    from .modelserver import HFPolicy

    def fn(model: Any, tok: Any) -> Dict[str, Any]:
        pol = HFPolicy(model, tok, max_new_tokens=max_tokens)
        return metrics("checkpoint", "local/checkpoint", play_model(binary, pol, "local/checkpoint", cases, db, max_tokens=max_tokens))

    return fn


def cmd_collect(a: argparse.Namespace) -> Dict[str, Any]:
    from .collect import collect

    return collect(find_binary(a.bin), Path(a.out), a.suites, min_score=a.min_score, eval_fraction=a.eval_fraction, split_seed=a.split_seed,
                   split_by=a.split)


def cmd_build_model(a: argparse.Namespace) -> Dict[str, Any]:
    from .tiny import build_model

    data = Path(a.data)
    files = sorted(data.glob("steps_train.jsonl")) + sorted(data.glob("sft_train.jsonl")) if data.is_dir() else [data]
    return build_model(Path(a.out), files, size=a.size, vocab_size=a.vocab_size, max_positions=a.max_positions)


def cmd_sft(a: argparse.Namespace) -> Dict[str, Any]:
    from .sft import sft

    data = Path(a.data)
    files = [data / "steps_train.jsonl", data / "sft_train.jsonl"]
    eval_fn = None
    if a.eval_cases > 0:
        eval_fn = eval_fn_for(find_binary(a.bin), _cases(data, a.eval_cases), Path(a.out) / "eval_runs.db", a.max_new_tokens)
    return sft(a.model, files, Path(a.out), a.kinds.split(","), max_steps=a.max_steps, lr=a.lr, batch_size=a.batch_size,
               grad_accum=a.grad_accum, max_length=a.max_length, lora=a.lora, eval_every=a.eval_every, eval_fn=eval_fn, threads=a.threads)


def _env_url(a: argparse.Namespace) -> Any:
    """The environment for a command: in process by default (``None``), or the server at ``--url``."""
    import contextlib

    return contextlib.nullcontext(a.url or None)


def cmd_grpo(a: argparse.Namespace) -> Dict[str, Any]:
    from .grpo import grpo, plan_rows

    data = Path(a.data)
    rows = plan_rows(data / "sft_train.jsonl", _public_train_cases(data))[: a.max_cases]
    with _env_url(a) as url:
        return grpo(a.model, url, Path(a.out), a.shape, rows, max_steps=a.max_steps, num_generations=a.num_generations,
                    batch_size=a.batch_size, max_completion_length=a.max_completion_length, lr=a.lr,
                    max_tool_calling_iterations=a.max_tool_calling_iterations, threads=a.threads)


def cmd_selfplay(a: argparse.Namespace) -> Dict[str, Any]:
    from .dpo import selfplay
    from .grpo import plan_rows

    data = Path(a.data)
    rows = plan_rows(data / "sft_train.jsonl", _public_train_cases(data))[: a.max_cases]
    with _env_url(a) as url:
        return selfplay(a.model, url, rows, Path(a.out), candidates=a.candidates, max_new_tokens=a.max_new_tokens, threads=a.threads)


def cmd_dpo(a: argparse.Namespace) -> Dict[str, Any]:
    from .dpo import dpo

    return dpo(a.model, Path(a.pairs), Path(a.out), max_steps=a.max_steps, lr=a.lr, batch_size=a.batch_size, threads=a.threads)


def cmd_compare(a: argparse.Namespace) -> Any:
    import torch

    from .evaluate import compare
    from .modelserver import load_policy

    torch.set_num_threads(a.threads)
    models = {Path(m).name if not m.startswith("replay:") else "replay": load_policy(m, max_new_tokens=a.max_new_tokens) for m in (a.model or [])}
    out = Path(a.out)
    db = Path(a.db) if a.db else out / "runs.db"
    baselines = [b for b in a.baselines.split(",") if b]
    return compare(find_binary(a.bin), _cases(Path(a.data), a.eval_cases), db, out, baselines, models, max_tokens=a.max_new_tokens)


def cmd_plot(a: argparse.Namespace) -> List[str]:
    from .plot import plot

    return plot(Path(a.out))


def cmd_audit_grpo(a: argparse.Namespace) -> Dict[str, Any]:
    from .audit import audit_grpo

    with _env_url(a) as url:
        return audit_grpo(a.model, url, Path(a.out), seeds=range(a.seed_from, a.seed_to + 1), max_steps=a.max_steps,
                          num_generations=a.num_generations, max_completion_length=a.max_completion_length, threads=a.threads)


def cmd_audit_eval(a: argparse.Namespace) -> Dict[str, Any]:
    from .audit import audit_eval

    with Server(find_binary(a.bin), env_kind="audit") as srv:
        return audit_eval(a.model, srv.url, Path(a.out), seeds=range(a.seed_from, a.seed_to + 1), max_new_tokens=a.max_new_tokens, threads=a.threads)


def cmd_structured(a: argparse.Namespace) -> Dict[str, Any]:
    from . import tasks
    from .pipeline import structured_checks, teacher_data
    from .structured import structured_stage

    recs = teacher_data(Path(a.out) / "data", a.train_episodes)["records"]
    st = structured_stage(Path(a.out), recs, tasks.held_out("validation", a.validation_episodes), tasks.held_out("test", a.test_episodes),
                          lr=a.lr, epochs=a.epochs, checkpoints=[int(x) for x in a.checkpoints.split(",") if x], rl_seeds=a.rl_seeds,
                          rl_iterations=a.rl_iterations, rl_group=a.rl_group, rl_batch=a.rl_batch,
                          rl_temperature=a.rl_temperature, rl_lr=a.rl_lr, rl_episodes=a.rl_episodes)
    st["checks"] = structured_checks({"margin": a.margin, "min_parse": a.min_parse}, st)
    (Path(a.out) / "structured_summary.json").write_text(json.dumps(st, indent=1))
    return st


def cmd_pipeline(a: argparse.Namespace) -> Dict[str, Any]:
    from .pipeline import pipeline

    overrides = {"size": a.size, "sft_minutes": a.sft_minutes, "sft_steps": a.sft_steps, "lr": a.lr, "eval_cases": a.eval_cases,
                 "train_episodes": a.train_episodes, "test_episodes": a.test_episodes}
    return pipeline(find_binary(a.bin), Path(a.out), preset=a.preset, threads=a.threads, overrides=overrides)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ledgershield-train", description=__doc__)
    p.add_argument("--bin", help="ledgershield binary (default: LEDGERSHIELD_BIN, target/debug/ledgershield, PATH)")
    p.add_argument("--url", help="grpo, selfplay and audit-grpo play in process by default; with --url they play against the "
                                 "ledgershield server there (ControlBench, or `serve --env audit` for audit-grpo)")
    p.add_argument("--threads", type=int, default=int(os.environ.get("LEDGERSHIELD_TRAIN_THREADS", "2")), help="torch CPU threads")
    sub = p.add_subparsers(dest="command", required=True)

    def model_arg(s: argparse.ArgumentParser, required: bool = True) -> None:
        s.add_argument("--model", required=required, help="hub name or local path")

    s = sub.add_parser("collect", help="teacher rollouts -> per-step and plan training data")
    s.add_argument("--out", required=True)
    s.add_argument("--suites", nargs="+", default=["public", "holdout:1-3"], help="public, holdout:SEED, quarter:A-B, twins:SEED, certificate")
    s.add_argument("--min-score", type=float, default=0.0)
    s.add_argument("--eval-fraction", type=float, default=0.3)
    s.add_argument("--split-seed", type=int, default=7)
    s.add_argument("--split", choices=["templates", "base"], default="templates",
                   help="templates: the task distribution's template split (train / validation / test); base: by base case, stratified")
    s.set_defaults(fn=cmd_collect)

    s = sub.add_parser("build-model", help="a tiny Qwen2-shaped model + tokenizer trained on environment text")
    s.add_argument("--out", required=True)
    s.add_argument("--data", required=True, help="collect's output folder (or one jsonl)")
    s.add_argument("--size", choices=["tiny", "small", "base"], default="tiny")
    s.add_argument("--vocab-size", type=int, default=4096)
    s.add_argument("--max-positions", type=int, default=8192)
    s.set_defaults(fn=cmd_build_model)

    s = sub.add_parser("sft", help="TRL SFT on per-step and plan examples")
    model_arg(s)
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--kinds", default="steps", help="steps, plan or steps,plan")
    s.add_argument("--max-steps", type=int, default=100)
    s.add_argument("--lr", type=float, default=1e-3)
    s.add_argument("--batch-size", type=int, default=4)
    s.add_argument("--grad-accum", type=int, default=1)
    s.add_argument("--max-length", type=int, default=2048)
    s.add_argument("--lora", action="store_true")
    s.add_argument("--eval-every", type=int, default=0, help="reward checkpoint every N steps (0: at the end only)")
    s.add_argument("--eval-cases", type=int, default=5, help="held-out episodes per reward checkpoint (0: none)")
    s.add_argument("--max-new-tokens", type=int, default=1024)
    s.set_defaults(fn=cmd_sft)

    s = sub.add_parser("grpo", help="TRL GRPO in process, or against --url (plan reward or tool calling)")
    model_arg(s)
    s.add_argument("--shape", choices=["plan", "tools"], default="plan")
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--max-steps", type=int, default=4)
    s.add_argument("--max-cases", type=int, default=8)
    s.add_argument("--num-generations", type=int, default=2)
    s.add_argument("--batch-size", type=int, default=2)
    s.add_argument("--max-completion-length", type=int, default=256)
    s.add_argument("--max-tool-calling-iterations", type=int, default=8)
    s.add_argument("--lr", type=float, default=1e-5)
    s.set_defaults(fn=cmd_grpo)

    s = sub.add_parser("selfplay", help="N candidates per case scored by the environment -> preference pairs")
    model_arg(s)
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--candidates", type=int, default=4)
    s.add_argument("--max-cases", type=int, default=8)
    s.add_argument("--max-new-tokens", type=int, default=256)
    s.set_defaults(fn=cmd_selfplay)

    s = sub.add_parser("dpo", help="TRL DPO on self-play pairs")
    model_arg(s)
    s.add_argument("--pairs", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--max-steps", type=int, default=4)
    s.add_argument("--batch-size", type=int, default=2)
    s.add_argument("--lr", type=float, default=1e-5)
    s.set_defaults(fn=cmd_dpo)

    for name, hlp in (("evaluate", "a checkpoint and the baselines on the held-out split"), ("compare", "several checkpoints and the baselines")):
        s = sub.add_parser(name, help=hlp)
        s.add_argument("--model", action="append", help="hub name, local path or replay:steps.jsonl (repeatable)")
        s.add_argument("--data", required=True)
        s.add_argument("--out", required=True)
        s.add_argument("--db", help="database for the runs (default: OUT/runs.db)")
        s.add_argument("--baselines", default="random,naive-pay,always-escalate,teacher")
        s.add_argument("--eval-cases", type=int, default=20)
        s.add_argument("--max-new-tokens", type=int, default=1024)
        s.set_defaults(fn=cmd_compare)

    s = sub.add_parser("plot", help="PNG figures from an output folder")
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_plot)

    s = sub.add_parser("audit-grpo", help="GRPO on the Financial Audit tasks (train seeds)")
    model_arg(s)
    s.add_argument("--out", required=True)
    s.add_argument("--seed-from", type=int, default=42)
    s.add_argument("--seed-to", type=int, default=51)
    s.add_argument("--max-steps", type=int, default=4)
    s.add_argument("--num-generations", type=int, default=2)
    s.add_argument("--max-completion-length", type=int, default=256)
    s.set_defaults(fn=cmd_audit_grpo)

    s = sub.add_parser("audit-eval", help="Financial Audit held-out evaluation beside the rule-based baseline")
    model_arg(s)
    s.add_argument("--out", required=True)
    s.add_argument("--seed-from", type=int, default=100)
    s.add_argument("--seed-to", type=int, default=104)
    s.add_argument("--max-new-tokens", type=int, default=512)
    s.set_defaults(fn=cmd_audit_eval)

    s = sub.add_parser("structured", help="the structured policy: behaviour cloning + group-relative RL, in process, on the task "
                                          "distribution's splits, against the scripted baselines (exits 1 when a check fails)")
    s.add_argument("--out", required=True)
    s.add_argument("--train-episodes", type=int, default=200, help="teacher episodes of the train set (train templates x train generators)")
    s.add_argument("--validation-episodes", type=int, default=24, help="episodes of each validation set (templates, generators)")
    s.add_argument("--test-episodes", type=int, default=60, help="episodes of each test set (templates, generators)")
    s.add_argument("--lr", type=float, default=0.05)
    s.add_argument("--epochs", type=int, default=60)
    s.add_argument("--checkpoints", default="5,10,20,40", help="BC epoch counts also scored on the validation episodes (the best is kept)")
    s.add_argument("--rl-seeds", type=int, default=3)
    s.add_argument("--rl-iterations", type=int, default=6)
    s.add_argument("--rl-group", type=int, default=4)
    s.add_argument("--rl-batch", type=int, default=8)
    s.add_argument("--rl-temperature", type=float, default=1.0)
    s.add_argument("--rl-lr", type=float, default=0.2)
    s.add_argument("--rl-episodes", type=int, default=200, help="training draws each RL seed samples from (seeds SFT/BC never saw)")
    s.add_argument("--margin", type=float, default=0.3, help="required lead over the best scripted baseline")
    s.add_argument("--min-parse", type=float, default=0.9)
    s.set_defaults(fn=cmd_structured)

    s = sub.add_parser("pipeline", help="the whole CPU pipeline with a locally built model (exits 1 when a check fails)")
    s.add_argument("--out", required=True)
    s.add_argument("--preset", choices=["ci", "scratch"], default="ci")
    s.add_argument("--size", choices=["tiny", "small", "base"], help="override the preset's model size")
    s.add_argument("--sft-minutes", type=float, help="override the preset's SFT time budget (0: step-limited)")
    s.add_argument("--sft-steps", type=int, help="override the preset's SFT step limit")
    s.add_argument("--lr", type=float, help="override the preset's SFT learning rate (the structured policy's scales with it; 0 trains nothing)")
    s.add_argument("--eval-cases", type=int, help="override the preset's free-generation episode count (ci)")
    s.add_argument("--train-episodes", type=int, help="override the preset's teacher episode count (train set)")
    s.add_argument("--test-episodes", type=int, help="override the preset's test episodes per test set")
    s.set_defaults(fn=cmd_pipeline)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    a = parser().parse_args(argv)
    result = a.fn(a)
    print(json.dumps(result, indent=1, default=str)[:20000])
    failed = [k for k, ok in (result.get("checks") or {}).items() if not ok] if isinstance(result, dict) else []
    if failed:
        print(f"checks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
