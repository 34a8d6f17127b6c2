"""``plot``: PNG figures from a training output folder: loss curve, reward checkpoints, policy
ladder, per-case scores, score-vs-unsafe-release frontier, result classes."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Dict, List


def _csv(path: Path) -> List[Dict[str, float]]:
    if not path.exists():
        return []
    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def plot(folder: Path) -> List[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: List[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(folder / name, dpi=110)
        plt.close(fig)
        written.append(name)

    loss = _csv(folder / "loss_history.csv")
    if loss:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([r["step"] for r in loss], [r["loss"] for r in loss])
        ax.set(xlabel="step", ylabel="training loss", title="SFT loss")
        save(fig, "loss_curve.png")
    rew = _csv(folder / "reward_eval_history.csv")
    if rew:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([r["step"] for r in rew], [r["mean_score"] for r in rew], marker="o", label="held-out mean score")
        ax.plot([r["step"] for r in rew], [r["parse_success"] for r in rew], marker="s", label="parse success")
        ax.set(xlabel="step", ylim=(0, 1), title="Reward checkpoints (held-out split)")
        ax.legend()
        save(fig, "reward_checkpoints.png")
    matrix_path = folder / "policy_matrix.json"
    if matrix_path.exists():
        rows = json.loads(matrix_path.read_text())
        names = [r["policy"] for r in rows]
        fig, ax = plt.subplots(figsize=(7, 3.5))
        ax.bar(names, [r["mean_score"] for r in rows])
        ax.set(ylabel="mean score", ylim=(0, 1), title="Policy ladder (held-out)")
        ax.tick_params(axis="x", rotation=30)
        save(fig, "policy_ladder.png")
        cases = sorted({c for r in rows for c in r["per_case"]})
        fig, ax = plt.subplots(figsize=(max(6, len(cases) * 0.35), 4))
        width = 0.8 / max(len(rows), 1)
        for i, r in enumerate(rows):
            ax.bar([j + i * width for j in range(len(cases))], [r["per_case"].get(c, 0.0) for c in cases], width, label=r["policy"])
        ax.set_xticks([j + 0.4 for j in range(len(cases))], cases, rotation=90, fontsize=6)
        ax.set(ylabel="score", ylim=(0, 1), title="Per-case scores")
        ax.legend(fontsize=6)
        save(fig, "per_case_scores.png")
        fig, ax = plt.subplots(figsize=(5, 4))
        for r in rows:
            ax.scatter(r["unsafe_release_rate"], r["mean_score"])
            ax.annotate(r["policy"], (r["unsafe_release_rate"], r["mean_score"]), fontsize=7)
        ax.set(xlabel="unsafe release rate", ylabel="mean score", xlim=(-0.05, 1.05), ylim=(0, 1), title="Score vs unsafe release")
        save(fig, "score_vs_unsafe.png")
        classes = sorted({k for r in rows for k in r["result_class_counts"]})
        fig, ax = plt.subplots(figsize=(7, 4))
        bottom = [0.0] * len(rows)
        for k in classes:
            vals = [float(r["result_class_counts"].get(k, 0)) for r in rows]
            ax.bar(names, vals, bottom=bottom, label=k)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set(ylabel="episodes", title="Result classes")
        ax.tick_params(axis="x", rotation=30)
        ax.legend(fontsize=6)
        save(fig, "result_classes.png")
    return written
