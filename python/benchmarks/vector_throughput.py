"""Steps per CPU-second of the Rust vector envs from Python, per reset distribution and
autoreset mode. Not a test: figures go to BENCHMARKS.md (with the machine named).

Every environment plays OCR fast, OCR accurate, submit HOLD (three steps, the last one graded)
by candidate index, on its own seeded resets; with ``--episode-steps L`` (L >= 3) the first
document is OCR'd fast L - 2 times before the accurate read, so episodes are L steps long and a
reset is shared by more steps (a task draw generates its case at the reset). Every timed reply is checked: each chosen index is
legal in its row's mask, each stepped row's last action succeeded (feature 15), rewards are
finite, and every episode ends terminated by its submission at its third step; the script fails
otherwise. Autoreset rows (NEXT_STEP) are not counted as steps. CPU time is the process's
(`time.process_time()`, every thread); the load average goes with each run.

    python python/benchmarks/vector_throughput.py --envs 16 --calls 3000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any, Dict, List, Tuple

import numpy as np
from gymnasium.vector import AutoresetMode

from ledgershield.vector import AuditVectorEnv, ControlBenchVectorEnv

CONFIGS: List[Tuple[str, Dict[str, Any]]] = [
    ("task distribution (default), NEXT_STEP", {}),
    ("task distribution, train/train", {"template_split": "train", "generator_split": "train"}),
    ("task distribution, SAME_STEP", {"autoreset_mode": AutoresetMode.SAME_STEP}),
    ("server pool reset (curriculum=True)", {"curriculum": True}),
    ("one case (CASE-D-001)", {"case_id": "CASE-D-001"}),
]


def run_controlbench(num_envs: int, calls: int, kwargs: Dict[str, Any], length: int = 3) -> Tuple[float, int]:
    vec = ControlBenchVectorEnv(num_envs=num_envs, threads=1, **kwargs)
    same = vec.autoreset_mode == AutoresetMode.SAME_STEP
    obs, _ = vec.reset(seed=7)
    autoreset = np.zeros(num_envs, dtype=bool)
    rows = np.arange(num_envs)
    steps = episodes = 0
    t0 = time.process_time()
    for _ in range(calls):
        k = obs["features"][:, 3]
        n = obs["action_mask"].sum(axis=1)
        actions = np.where(k < length - 2, 0, np.where(k == length - 2, 1, n - 3))  # ocr fast, accurate, HOLD
        legal = obs["action_mask"][rows, actions] == 1
        assert legal[~autoreset].all(), "an illegal candidate index was chosen"
        obs, reward, term, trunc, infos = vec.step(actions)
        stepped = ~autoreset
        after = infos["final_obs"] if same and (term | trunc).any() else None
        feats = np.stack([after[i]["features"] if after is not None and after[i] is not None else obs["features"][i]
                          for i in range(num_envs)])
        assert np.isfinite(reward).all()
        assert (feats[stepped, 15] == 1.0).all(), "a timed step failed"
        ended = term | trunc
        assert not trunc.any(), "an episode was truncated"
        assert (feats[ended, 3] == length).all(), "an episode did not end at its submission"
        steps += int(stepped.sum())
        episodes += int(ended.sum())
        autoreset = ended if not same else np.zeros(num_envs, dtype=bool)
    cpu = time.process_time() - t0
    assert episodes > 0
    return steps / cpu, steps


def run_audit(num_envs: int, calls: int) -> Tuple[float, int]:
    vec = AuditVectorEnv(num_envs=num_envs, threads=1)
    obs, _ = vec.reset(seed=7)
    autoreset = np.zeros(num_envs, dtype=bool)
    steps = 0
    t0 = time.process_time()
    for _ in range(calls):
        actions = np.where(obs["features"][:, 0] == 0, 1, 0)  # one finding, then submit final
        assert (obs["action_mask"][np.arange(num_envs), actions] == 1)[~autoreset].all()
        obs, reward, term, trunc, _ = vec.step(actions)
        assert np.isfinite(reward).all() and not trunc.any()
        steps += int((~autoreset).sum())
        autoreset = term | trunc
    return steps / (time.process_time() - t0), steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--episode-steps", type=int, default=3)
    args = ap.parse_args()
    assert args.episode_steps >= 3
    results: Dict[str, List[float]] = {}
    for r in range(args.rounds):
        for name, kwargs in CONFIGS:
            rate, steps = run_controlbench(args.envs, args.calls, kwargs, args.episode_steps)
            results.setdefault(name, []).append(rate)
            print(f"round {r + 1}: {name}: {rate:,.0f} steps/CPU-s ({steps} steps), load {os.getloadavg()[0]:.1f}", flush=True)
        rate, steps = run_audit(args.envs, args.calls)
        results.setdefault("audit vector env", []).append(rate)
        print(f"round {r + 1}: audit vector env: {rate:,.0f} steps/CPU-s ({steps} steps), load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"\nN={args.envs}, threads=1, {args.calls} calls, {args.episode_steps}-step episodes, {args.rounds} rounds: "
          "median (min-max) steps per CPU-second")
    for name, rates in results.items():
        print(f"| {name} | {statistics.median(rates):,.0f} | {min(rates):,.0f}-{max(rates):,.0f} |")


if __name__ == "__main__":
    main()
