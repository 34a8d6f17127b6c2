"""``plot``: PNG figures from a training output folder: loss curve, reward checkpoints, policy
ladder, per-case scores, score-vs-unsafe-release frontier, result classes; with the structured
stage's outputs also the ladder of test macro means with 95 % bootstrap intervals
(``ladder_ci.png``), per held-out template and generator (``per_template.png``), per family
(``per_family.png``), the behaviour-cloning curve (``bc_curve.png``) and the RL reward per
iteration and seed (``rl_curve.png``); with the compact LM's outputs its GRPO curve per run beside
its SFT start and test results (``lm_rl_curve.png``). Labels go in legends or on rotated axes, never on points."""

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
        key = "macro" if "macro" in rew[0] else "mean_score"
        ax.plot([r["step"] for r in rew], [r[key] for r in rew], marker="o", label=f"validation {'macro mean' if key == 'macro' else 'mean score'}")
        ax.plot([r["step"] for r in rew], [r["parse_success"] for r in rew], marker="s", label="parse success")
        ax.set(xlabel="step", ylim=(0, 1), title="Reward checkpoints (validation episodes)")
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
        fig, ax = plt.subplots(figsize=(6.5, 4))
        markers = "osD^v<>pPX*h"
        for i, r in enumerate(rows):
            ax.scatter(r["unsafe_release_rate"], r["mean_score"], marker=markers[i % len(markers)], label=r["policy"])
        ax.set(xlabel="unsafe release rate", ylabel="mean score", xlim=(-0.05, 1.05), ylim=(0, 1), title="Score vs unsafe release")
        ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
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
    _structured_plots(folder, plt, save)
    return written


def _structured_plots(folder: Path, plt: Any, save: Any) -> None:
    ladder_path = folder / "ladder.json" if (folder / "ladder.json").exists() else folder / "structured_matrix.json"
    if ladder_path.exists():
        rows = json.loads(ladder_path.read_text())
        key, ci = ("macro", "macro_ci95") if all("macro" in r for r in rows) else ("mean_score", "ci95")
        rows = sorted(rows, key=lambda r: r[key])
        fig, ax = plt.subplots(figsize=(7, 0.4 * len(rows) + 1.5))
        ys = range(len(rows))
        ax.barh(list(ys), [r[key] for r in rows], color="#9ab")
        ax.errorbar([r[key] for r in rows], list(ys), fmt="none", ecolor="k", capsize=3,
                    xerr=[[max(r[key] - r[ci][0], 0) for r in rows], [max(r[ci][1] - r[key], 0) for r in rows]])
        ax.set_yticks(list(ys), [f"{r['policy']} (n={r['episodes']})" for r in rows], fontsize=7)
        what = "test macro mean (per held-out template and generator)" if key == "macro" else "held-out mean score"
        ax.set(xlabel=f"{what}, 95 % bootstrap CI", xlim=(0, 1), title="Policy ladder, test episodes")
        save(fig, "ladder_ci.png")
        groups = sorted({g for r in rows for g in r.get("per_template", {})}) + sorted({g for r in rows for g in r.get("per_generator", {})})
        if groups:
            fig, ax = plt.subplots(figsize=(9, 4))
            width = 0.8 / max(len(rows), 1)
            for i, r in enumerate(rows):
                vals = [dict(r.get("per_template", {}), **r.get("per_generator", {})).get(g, 0.0) for g in groups]
                ax.bar([j + i * width for j in range(len(groups))], vals, width, label=r["policy"])
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))], groups, rotation=30, fontsize=7)
            ax.set(ylabel="mean score", ylim=(0, 1), title="Per held-out template and generator (test)")
            ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
            save(fig, "per_template.png")
        fams = sorted({f for r in rows for f in r.get("per_family", {})})
        if fams:
            fig, ax = plt.subplots(figsize=(8, 4))
            width = 0.8 / max(len(rows), 1)
            for i, r in enumerate(rows):
                ax.bar([j + i * width for j in range(len(fams))], [r["per_family"].get(f, 0.0) for f in fams], width, label=r["policy"])
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(fams))], fams)
            ax.set(ylabel="mean score", ylim=(0, 1), title="Per task family (held-out)")
            ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
            save(fig, "per_family.png")
    curve = _csv(folder / "structured_curve.csv")
    if curve:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        key = "macro" if "macro" in curve[0] else "mean_score"
        ax.plot([r["epoch"] for r in curve], [r[key] for r in curve], marker="o", label="validation macro mean" if key == "macro" else "held-out mean score")
        ax2 = ax.twinx()
        ax2.plot([r["epoch"] for r in curve], [r["loss_type"] for r in curve], color="tab:red", marker="s", label="action-type loss")
        ax.set(xlabel="behaviour-cloning epochs", ylabel="score", ylim=(0, 1), title="Structured policy: BC checkpoints")
        ax2.set_ylabel("training loss (action type)")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="center right")
        save(fig, "bc_curve.png")
    rl = _csv(folder / "structured_rl_history.csv")
    if rl:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for seed in sorted({int(r["seed"]) for r in rl}):
            pts = [r for r in rl if int(r["seed"]) == seed]
            ax.plot([r["iteration"] for r in pts], [r["mean_reward"] for r in pts], marker="o", label=f"seed {seed}")
        ax.set(xlabel="RL iteration", ylabel="mean sampled reward (training cases)", ylim=(0, 1), title="Group-relative RL on the structured policy")
        ax.legend(fontsize=7)
        save(fig, "rl_curve.png")
    lm_rl = [r for r in _csv_raw(folder / "compact_rl_history.csv")]
    summary = folder / "compact_lm" / "compact_lm_summary.json"
    if lm_rl and summary.exists():
        cl = json.loads(summary.read_text())
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        runs = (cl.get("rl") or {}).get("runs") or []
        for i, r in enumerate(runs):
            pts = [x for x in lm_rl if int(float(x["run"])) == i]
            ax.plot([float(x["iteration"]) for x in pts], [float(x["mean_reward"]) for x in pts], marker="o", markersize=2,
                    label=f"{r['reward']} s{r['seed']}: sampled score (train)")
        ax.axhline(cl["sft_held_out"], color="k", linestyle="--", label=f"SFT checkpoint, test macro {cl['sft_held_out']:.3f}")
        for r in runs:
            ax.scatter([max(h["iteration"] for h in r["history"])], [r["test"]["macro"]], marker="*" if r["reward"] == "score" else "D", s=50,
                       label=f"{r['reward']} s{r['seed']}: test macro after RL")
        ax.set(xlabel="GRPO iteration", ylabel="score", ylim=(0, 1), title="Compact LM: group-relative RL")
        ax.legend(fontsize=5, loc="center left", bbox_to_anchor=(1.0, 0.5))
        save(fig, "lm_rl_curve.png")


def _csv_raw(path: Path) -> List[Dict[str, str]]:
    if not path.exists():
        return []
    with open(path) as f:
        return list(csv.DictReader(f))
