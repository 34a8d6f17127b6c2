"""``collect``: teacher rollouts over curated and generated suites, exported as per-step
(closed-loop) and plan training data, split by base case and stratified by task family.

Suite specs: ``public`` (the curated cases), ``holdout:SEED``, ``quarter:SEED`` (a generated
quarter of 100 cases), ``twins:SEED``, ``certificate``; ``quarter:1-20`` expands to 20 seeds.
Output (``--out``): ``runs.db`` (every run, also the leaderboard's store), ``steps_{train,eval}.jsonl``,
``sft_{train,eval}.jsonl``, ``split.json`` and ``eval_cases.json`` (held-out episodes with the
suite and seed that reproduce them).

The split (``split``): ``templates`` (default) follows the task distribution's template split
(``ls_gen::tasks::TEMPLATE_SPLITS``, ``docs/python.md``): an episode whose base template is a
training template is training data, one of a test template is held out (``*_eval``), one of a
validation template goes to ``*_validation.jsonl``; ``base`` is ``ledgershield export``'s split by
base case, stratified by family (``eval_fraction``, ``split_seed``).
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


def collect(binary: str, out: Path, suites: List[str], min_score: float = 0.0, eval_fraction: float = 0.3, split_seed: int = 7, agent: str = "teacher",
            split_by: str = "templates") -> Dict[str, Any]:
    if split_by not in ("templates", "base"):
        raise ValueError(f"split_by must be 'templates' or 'base', got {split_by!r}")
    out.mkdir(parents=True, exist_ok=True)
    db = out / "runs.db"
    runs: Dict[str, Dict[str, Any]] = {}
    for suite, seed in expand_suites(suites):
        summary = run_agent(binary, agent, db, suite=suite, seed=seed)
        runs[summary["run_id"]] = {"suite": suite, "seed": seed, "episodes": len(summary["episodes"]), "mean_score": summary["metrics"]["mean_score"]}
    split = export(binary, db, out, "steps", runs, min_score=min_score, eval_fraction=eval_fraction, seed=split_seed)
    export(binary, db, out, "sft", runs, min_score=min_score, eval_fraction=eval_fraction, seed=split_seed)
    if split_by == "templates":
        split = split_by_templates(out, split)
    eval_cases = [dict(e, suite=runs[e["run_id"]]["suite"], seed=runs[e["run_id"]]["seed"]) for e in split["eval_episodes"]]
    (out / "eval_cases.json").write_text(json.dumps(eval_cases, indent=1))
    info = {"runs": runs, "episodes_recorded": split["episodes_recorded"], "episodes_kept": split["episodes_kept"],
            "train_rows": split["train_count"], "eval_rows": split["eval_count"], "eval_episodes": len(eval_cases),
            "eval_base_cases": split["eval_base_cases"], "min_score": min_score}
    (out / "collect.json").write_text(json.dumps(info, indent=1))
    return info


def split_by_templates(out: Path, split: Dict[str, Any]) -> Dict[str, Any]:
    """Re-split the exported rows by their base template's split (train, validation, test: held
    out); rewrites ``steps_*`` / ``sft_*`` and ``split.json``, returns the new split."""
    from .tasks import template_splits

    splits = template_splits()
    episodes: Dict[str, Dict[str, Any]] = {}
    for kind in ("steps", "sft"):
        rows = [json.loads(line) for f in ("train", "eval") for line in (out / f"{kind}_{f}.jsonl").read_text().splitlines() if line.strip()]
        parts: Dict[str, List[str]] = {"train": [], "validation": [], "eval": []}
        for r in rows:
            m = r["metadata"]
            side = {"train": "train", "validation": "validation", "test": "eval"}.get(splits.get(str(m.get("base_case_id") or m["case_id"])) or "train")
            m["split"] = side
            parts[side].append(json.dumps(r))
            if side == "eval":
                episodes.setdefault(f"{m['run_id']}/{m['case_id']}", {k: m[k] for k in ("case_id", "run_id", "task_type", "score")})
        for side, lines in parts.items():
            (out / f"{kind}_{side}.jsonl").write_text("".join(x + "\n" for x in lines))
    bases = {side: sorted({b for b, s in splits.items() if s == name}) for side, name in (("train", "train"), ("eval", "test"), ("validation", "validation"))}
    new = dict(split, split_by="template (ls_gen::tasks::TEMPLATE_SPLITS)", stratified_by=None, train_base_cases=bases["train"],
               eval_base_cases=bases["eval"], validation_base_cases=bases["validation"], eval_episodes=list(episodes.values()),
               train_count=sum(1 for _ in (out / "steps_train.jsonl").read_text().splitlines()),
               eval_count=sum(1 for _ in (out / "steps_eval.jsonl").read_text().splitlines()))
    (out / "split.json").write_text(json.dumps(new, indent=1))
    return new


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
