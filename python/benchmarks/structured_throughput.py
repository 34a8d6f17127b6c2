"""Steps per CPU-second of the structured vector env (observation_mode="structured", factored
actions) from Python. Not a test: figures go to BENCHMARKS.md (with the machine named).

Every environment plays, by factored action name, ``tool.ocr`` -> ``point.best`` (the tool's
argument: the first document) -> ``decide.HOLD`` -> ``submit``: four factored steps, two of them
reaching the environment (the OCR and the graded submission), on its own task-distribution
resets. Every timed step is checked: each chosen index is legal in its row's mask, rewards are
finite, every episode ends terminated by its submission at its fourth factored step, and no
episode is truncated; the script fails otherwise. Autoreset rows (NEXT_STEP) are not counted.
CPU time is the process's (``time.process_time()``, every thread).

    python python/benchmarks/structured_throughput.py --envs 16 --calls 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Tuple

import numpy as np

from ledgershield.structured import ACTION_NAMES, StructuredControlBenchVectorEnv

PLAN = ["tool.ocr", "point.best", "decide.HOLD", "submit"]
INDEX = {n: i for i, n in enumerate(ACTION_NAMES)}


def run(num_envs: int, calls: int) -> Tuple[float, int, int]:
    vec = StructuredControlBenchVectorEnv(num_envs=num_envs, threads=1)
    obs, _ = vec.reset(seed=11)
    phase = np.zeros(num_envs, dtype=np.int64)
    autoreset = np.zeros(num_envs, dtype=bool)
    rows = np.arange(num_envs)
    plan = np.array([INDEX[n] for n in PLAN])
    steps = episodes = 0
    t0 = time.process_time()
    for _ in range(calls):
        mask = obs["action_mask"]
        actions = np.where(autoreset, mask.argmax(axis=1), plan[np.minimum(phase, len(PLAN) - 1)])
        assert (mask[rows, actions] == 1)[~autoreset].all(), "an illegal factored action was chosen"
        obs, reward, term, trunc, _ = vec.step(actions)
        assert np.isfinite(reward).all()
        assert not trunc.any(), "an episode was truncated"
        stepped = ~autoreset
        steps += int(stepped.sum())
        phase = np.where(stepped, phase + 1, 0)
        assert (term[stepped] == (phase[stepped] == len(PLAN))).all(), "an episode did not end at its submission"
        episodes += int(term.sum())
        autoreset = term | trunc
    cpu = time.process_time() - t0
    vec.close()
    return steps / cpu, steps, episodes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    rates = []
    for r in range(a.rounds):
        rate, steps, episodes = run(a.envs, a.calls)
        rates.append(rate)
        print(f"round {r + 1}: {rate:,.0f} factored steps per CPU-second ({steps} steps, {episodes} episodes; "
              f"load {os.getloadavg()[0]:.2f})")
    print(f"median {statistics.median(rates):,.0f} steps per CPU-second over {a.rounds} rounds, N={a.envs}")


if __name__ == "__main__":
    main()
