"""``collect``: teacher rollouts over curated and generated suites, exported as per-step
(closed-loop) and plan training data, split by base case and stratified by task family.

Suite specs: ``public`` (the curated cases), ``holdout:SEED``, ``quarter:SEED`` (a generated
quarter of 100 cases), ``twins:SEED``, ``certificate``; ``quarter:1-20`` expands to 20 seeds.
Output (``--out``): ``runs.db`` (every run, also the leaderboard's store), ``steps_{train,eval}.jsonl``,
``sft_{train,eval}.jsonl``, ``split.json`` and ``eval_cases.json`` (held-out episodes with the
suite and seed that reproduce them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

from .binary import export, run_agent


def expand_suites(specs: List[str]) -> List[Tuple[str, int]]:
    out: List[Tuple[str, int]] = []
    for spec in specs:
        name, _, seeds = spec.partition(":")
        if not seeds:
            out.append((name, 2026))
        elif "-" in seeds:
            a, b = (int(x) for x in seeds.split("-", 1))
            out.extend((name, s) for s in range(a, b + 1))
        else:
            out.append((name, int(seeds)))
    return out


def collect(binary: str, out: Path, suites: List[str], min_score: float = 0.0, eval_fraction: float = 0.3, split_seed: int = 7, agent: str = "teacher") -> Dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    db = out / "runs.db"
    runs: Dict[str, Dict[str, Any]] = {}
    for suite, seed in expand_suites(suites):
        summary = run_agent(binary, agent, db, suite=suite, seed=seed)
        runs[summary["run_id"]] = {"suite": suite, "seed": seed, "episodes": len(summary["episodes"]), "mean_score": summary["metrics"]["mean_score"]}
    split = export(binary, db, out, "steps", runs, min_score=min_score, eval_fraction=eval_fraction, seed=split_seed)
    export(binary, db, out, "sft", runs, min_score=min_score, eval_fraction=eval_fraction, seed=split_seed)
    eval_cases = [dict(e, suite=runs[e["run_id"]]["suite"], seed=runs[e["run_id"]]["seed"]) for e in split["eval_episodes"]]
    (out / "eval_cases.json").write_text(json.dumps(eval_cases, indent=1))
    info = {"runs": runs, "episodes_recorded": split["episodes_recorded"], "episodes_kept": split["episodes_kept"],
            "train_rows": split["train_count"], "eval_rows": split["eval_count"], "eval_episodes": len(eval_cases),
            "eval_base_cases": split["eval_base_cases"], "min_score": min_score}
    (out / "collect.json").write_text(json.dumps(info, indent=1))
    return info


def pick_eval_cases(eval_cases: List[Dict[str, Any]], limit: int) -> List[Dict[str, Any]]:
    """Up to ``limit`` held-out episodes, round-robin over task families (every family present)."""
    by_family: Dict[str, List[Dict[str, Any]]] = {}
    for e in eval_cases:
        by_family.setdefault(e["task_type"], []).append(e)
    picked: List[Dict[str, Any]] = []
    queues = [list(v) for _, v in sorted(by_family.items())]
    while len(picked) < limit and any(queues):
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    return picked
