"""TensorBoard event files for every training stage of a pipeline run.

``write_events(run_dir)`` reads what the stages recorded in ``run_dir`` (``training_metrics.json``
and the per-step CSVs: ``loss_history.csv``, ``reward_eval_history.csv``,
``structured_curve.csv``, ``structured_rl_history.csv``, ``compact_rl_history.csv``) and writes
one TensorBoard run per stage under ``run_dir/tensorboard/<stage>/`` with ``tensorboardX``:

=================  =============================================================================
stage              scalars (step axis)
=================  =============================================================================
collect            teacher episodes recorded and kept, training rows (0)
sft                loss and learning rate per optimizer step; the reward checkpoints
grpo_plan          reward std per GRPO step; mean reward, rollouts graded
grpo_tools         the same for the ``environment_factory`` run
selfplay_dpo       DPO loss per step; self-play candidates and their mean score
evaluate           each policy's held-out mean score, unsafe-release rate (the policy matrix)
structured         BC curve per epoch; RL mean reward, reward std per iteration, one run per seed;
                   each policy's test macro mean, its two parts, mean score, unsafe release
lm_constrained     each LM checkpoint's score under candidate-constrained decoding
compact_lm         the compact LM's SFT loss per logged step, validation checkpoints; its RL history per run
pipeline           wall time of every stage (s)
=================  =============================================================================

A stage the run did not have (``compact_lm`` on the ``ci`` preset) gets no directory. The values
are the ones the stages measured and wrote; nothing is recomputed. ``python -m
ledgershield.training.tb_events RUN_DIR`` writes them for a finished run (the committed results in
``docs/training/`` included); ``pipeline`` calls it at the end.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional


def _rows(path: Path) -> List[Dict[str, float]]:
    if not path.exists():
        return []
    out = []
    with path.open() as f:
        for r in csv.DictReader(f):
            row = {}
            for k, v in r.items():
                try:
                    row[k] = float(v)
                except (TypeError, ValueError):
                    continue
            out.append(row)
    return out


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class _Stage:
    """One stage's writer, created on the first scalar (so an empty stage leaves no directory)."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name, self.writer, self.count = root, name, None, 0

    def add(self, tag: str, value: Any, step: int) -> None:
        v = _num(value)
        if v is None:
            return
        if self.writer is None:
            from tensorboardX import SummaryWriter

            # A rewrite replaces the stage's earlier event files (TensorBoard would show both).
            for old in (self.root / self.name).glob("events.out.tfevents.*"):
                old.unlink()
            self.writer = SummaryWriter(logdir=str(self.root / self.name), flush_secs=1)
        self.writer.add_scalar(tag, v, int(step))
        self.count += 1

    def series(self, prefix: str, rows: Iterable[Dict[str, float]], step_key: str, keys: Iterable[str]) -> None:
        for r in rows:
            for k in keys:
                if k in r and step_key in r:
                    self.add(f"{prefix}/{k}", r[k], int(r[step_key]))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _per_seed(stage: _Stage, rows: List[Dict[str, float]], keys: List[str], prefix: str) -> None:
    for r in rows:
        name = f"run{int(r['run'])}" if "run" in r else f"seed{int(r.get('seed', 0))}"
        for k in keys:
            if k in r:
                stage.add(f"{prefix}/{name}/{k}", r[k], int(r.get("iteration", 0)))


def _policy_rows(stage: _Stage, rows: Any, prefix: str) -> None:
    for i, r in enumerate(rows or []):
        name = str(r.get("policy", i)).replace(" ", "_")
        for k in ("macro", "macro_templates", "macro_generators", "mean_score", "unsafe_release_rate", "parse_success", "pass_rate"):
            stage.add(f"{prefix}/{name}/{k}", r.get(k), 0)


def write_events(run_dir: Path) -> Dict[str, int]:
    """Write the event files; returns the number of scalars per stage directory written."""
    run_dir = Path(run_dir)
    metrics: Dict[str, Any] = {}
    mpath = run_dir / "training_metrics.json"
    if mpath.exists():
        metrics = json.loads(mpath.read_text())
    root = run_dir / "tensorboard"
    stages: Dict[str, _Stage] = {}

    def st(name: str) -> _Stage:
        return stages.setdefault(name, _Stage(root, name))

    col = metrics.get("collect") or {}
    for k in ("episodes_recorded", "episodes_kept", "train_rows", "eval_rows", "eval_episodes"):
        st("collect").add(f"collect/{k}", col.get(k), 0)

    loss = _rows(run_dir / "loss_history.csv")
    stage_name = "compact_lm" if metrics.get("compact_lm") else "sft"
    st(stage_name).series("sft", loss, "step", ["loss", "learning_rate"])
    st(stage_name).series("reward_checkpoints", _rows(run_dir / "reward_eval_history.csv"), "step",
                          ["macro", "mean_score", "parse_success", "unsafe_release_rate"])

    std = metrics.get("grpo_reward_std") or {}
    for key, name in (("plan", "grpo_plan"), ("tools", "grpo_tools")):
        g = metrics.get(name) or {}
        for step, v in enumerate(std.get(key) or [], start=1):
            st(name).add("grpo/reward_std", v, step)
        for k in ("mean_reward", "rollouts_graded", "rollouts_expected", "steps"):
            st(name).add(f"grpo/{k}", g.get(k), int(g.get("steps") or 0))

    dpo = metrics.get("dpo") or {}
    for step, v in enumerate(dpo.get("losses") or [], start=1):
        st("selfplay_dpo").add("dpo/loss", v, step)
    sp = metrics.get("selfplay") or {}
    for k in ("candidates_scored", "pairs", "mean_candidate_score"):
        st("selfplay_dpo").add(f"selfplay/{k}", sp.get(k), 0)

    _policy_rows(st("evaluate"), metrics.get("policy_matrix"), "policy")

    s = st("structured")
    s.series("bc", _rows(run_dir / "structured_curve.csv"), "epoch", ["macro", "mean_score", "parse_success", "loss_type", "loss_decision"])
    _per_seed(s, _rows(run_dir / "structured_rl_history.csv"), ["mean_reward", "reward_std", "zero_variance_groups"], "rl")
    _policy_rows(s, (metrics.get("structured") or {}).get("matrix"), "held_out")

    _policy_rows(st("lm_constrained"), metrics.get("lm_constrained"), "constrained")
    _per_seed(st("compact_lm"), _rows(run_dir / "compact_rl_history.csv"), ["mean_reward", "mean_return", "reward_std", "zero_variance_groups", "loss"], "rl")

    for k, v in (metrics.get("timings_s") or {}).items():
        st("pipeline").add(f"time_s/{k}", v, 0)

    for stage in stages.values():
        stage.close()
    return {name: stage.count for name, stage in stages.items() if stage.count}


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ledgershield.training.tb_events RUN_DIR", file=sys.stderr)
        return 2
    written = write_events(Path(args[0]))
    for name, n in sorted(written.items()):
        print(f"{name}: {n} scalars")
    print(f"tensorboard --logdir {Path(args[0]) / 'tensorboard'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
