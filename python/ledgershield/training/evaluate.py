"""``evaluate`` / ``compare``: any checkpoint and the baselines on one held-out split, with the
seed's metrics, written as ``policy_matrix.csv`` and ``policy_matrix.json``.

A checkpoint is played by ``ledgershield run --agent llm`` against a local OpenAI-compatible
endpoint serving it (:mod:`.modelserver`), so it is scored by exactly the action protocol of
its training data; baselines are ``ledgershield run --agent random|naive-pay|always-escalate|teacher``.
Every run is stored in the database like any other run (it reaches the leaderboard).
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional

from .binary import episode_records, run_agent

BASELINES = ["random", "naive-pay", "always-escalate", "teacher"]
FALLBACK_NOTES = ("model output unparseable", "model call failed", "model refused", "step limit reached")
MATRIX_FIELDS = ["policy", "model", "episodes", "mean_score", "mean_total_reward", "control_satisfied_resolution",
                 "certificate_score", "parse_success", "unsafe_release_rate", "pass_rate", "mean_steps", "result_class_counts"]


def _is_fallback(step: Dict[str, Any]) -> bool:
    notes = str(step.get("payload", {}).get("notes", ""))
    return step.get("action_type") == "submit_decision" and notes.startswith(FALLBACK_NOTES)


def metrics(policy: str, model: str, records: List[Dict[str, Any]]) -> Dict[str, Any]:
    n = max(len(records), 1)
    steps = [s for r in records for s in r["trajectory"]]
    parsed = sum(1 for s in steps if not _is_fallback(s))
    return {
        "policy": policy,
        "model": model,
        "episodes": len(records),
        "mean_score": round(sum(r["final_score"] for r in records) / n, 4),
        "mean_total_reward": round(sum(r["total_reward"] for r in records) / n, 4),
        "control_satisfied_resolution": round(sum(r["control_satisfied_resolution"] for r in records) / n, 4),
        "certificate_score": round(sum(r["certificate_score"] for r in records) / n, 4),
        "parse_success": round(parsed / max(len(steps), 1), 4),
        "unsafe_release_rate": round(sum(1 for r in records if r["unsafe_release"]) / n, 4),
        "pass_rate": round(sum(1 for r in records if r["final_score"] >= 0.85) / n, 4),
        "mean_steps": round(sum(r["steps"] for r in records) / n, 3),
        "result_class_counts": dict(Counter(r["result_class"] for r in records)),
        "per_case": {r["case_id"]: round(r["final_score"], 4) for r in records},
    }


def play(binary: str, agent: str, cases: List[Dict[str, Any]], db: Path, extra: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    """Play ``cases`` (``{suite, seed, case_id}``) with ``agent``; the stored records, in order."""
    groups: Dict[tuple, List[str]] = defaultdict(list)
    for c in cases:
        groups[(c["suite"], int(c["seed"]))].append(c["case_id"])
    out: List[Dict[str, Any]] = []
    for (suite, seed), ids in sorted(groups.items()):
        summary = run_agent(binary, agent, db, suite=suite, seed=seed, cases=ids, extra=extra or [])
        out.extend(episode_records(db, summary["run_id"]))
    return out


def play_model(binary: str, policy: Any, model_name: str, cases: List[Dict[str, Any]], db: Path, max_tokens: int = 1024, timeout_secs: int = 600) -> List[Dict[str, Any]]:
    """Serve ``policy`` locally and play it through ``ledgershield run --agent llm``."""
    from .modelserver import serve

    base, server = serve(policy)
    try:
        extra = ["--api-base", base, "--model", model_name, "--max-tokens", str(max_tokens),
                 "--timeout-secs", str(timeout_secs), "--retries", "0", "--temperature", "0"]
        return play(binary, "llm", cases, db, extra)
    finally:
        server.shutdown()
        server.server_close()


def write_matrix(rows: List[Dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "policy_matrix.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=MATRIX_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(dict(r, result_class_counts=json.dumps(r["result_class_counts"], sort_keys=True)))
    (out / "policy_matrix.json").write_text(json.dumps(rows, indent=1))


def compare(binary: str, cases: List[Dict[str, Any]], db: Path, out: Path, baselines: List[str], models: Dict[str, Any], max_tokens: int = 1024) -> List[Dict[str, Any]]:
    """Baselines and models (``{label: policy}``) on ``cases``; writes the policy matrix."""
    rows = []
    for b in baselines:
        rows.append(metrics(b, f"ledgershield/{b}", play(binary, b, cases, db)))
    for label, policy in models.items():
        name = label if label.startswith("local/") else f"local/{label}"
        rows.append(metrics(label, name, play_model(binary, policy, name, cases, db, max_tokens=max_tokens)))
    write_matrix(rows, out)
    return rows
