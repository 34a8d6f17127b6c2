"""The structured observation and the factored action space (``ledgershield.structured``,
``gym.make(ID, observation_mode="structured")``), in process: Gymnasium's checker, replay,
what each kind of policy earns (the teacher re-expressed through the factored space; random
legal play; a policy that never submits), the vector env's masks and batches, and each vector
row byte for byte the single env replaying its episodes."""

from __future__ import annotations

import random
from typing import Callable, Dict, List

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import ledgershield  # noqa: F401
from ledgershield.structured import (
    ACTION_NAMES,
    FACTORED_ACTIONS,
    MAX_ROWS,
    ROW_FEATURES,
    StructuredControlBenchEnv,
    StructuredControlBenchVectorEnv,
)

CB = "LedgerShield/ControlBench-v0"
# Held-out draws: test templates x test generators of the task distribution (docs/python.md).
HELD_OUT = {"template_split": "test", "generator_split": "test"}
STEP_CAP = 2_000


def play(env: StructuredControlBenchEnv, seed: int, choose: Callable[[np.ndarray], int]) -> Dict[str, float]:
    obs, _ = env.reset(seed=seed)
    for _ in range(STEP_CAP):
        obs, _, terminated, truncated, info = env.step(choose(obs["action_mask"]))
        if terminated or truncated:
            return {"score": info["final_score"], "return": info["episode_return"], "terminated": terminated}
    raise AssertionError(f"seed {seed}: no episode end within {STEP_CAP} steps")


def random_legal(rng: random.Random, allowed: Callable[[str], bool] = lambda _: True) -> Callable[[np.ndarray], int]:
    def choose(mask: np.ndarray) -> int:
        legal = [i for i in np.flatnonzero(mask) if allowed(ACTION_NAMES[i])]
        assert legal, "a live episode always has a legal action"
        return rng.choice(legal)
    return choose


def test_gymnasium_checker_passes_and_make_builds_the_structured_env() -> None:
    env = gym.make(CB, observation_mode="structured")
    assert isinstance(env.unwrapped, StructuredControlBenchEnv)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert obs["rows"].shape == (MAX_ROWS, ROW_FEATURES)
    assert obs["action_mask"].shape == (FACTORED_ACTIONS,)
    assert set(info) == {"composed", "final_score", "result_class", "episode_return", "task"}
    with pytest.raises(ValueError, match="factored"):
        gym.make(CB, observation_mode="dict", action_mode="factored")


def test_same_seed_and_actions_replay_byte_for_byte() -> None:
    runs: List[List[bytes]] = []
    for _ in range(2):
        env = StructuredControlBenchEnv(**HELD_OUT)
        rng = random.Random(11)
        obs, _ = env.reset(seed=42)
        trace = [obs["global"].tobytes() + obs["rows"].tobytes()]
        for _ in range(60):
            obs, reward, terminated, truncated, _ = env.step(random_legal(rng)(obs["action_mask"]))
            trace.append(obs["global"].tobytes() + obs["rows"].tobytes() + np.float64(reward).tobytes())
            if terminated or truncated:
                break
        runs.append(trace)
    assert runs[0] == runs[1]


def test_the_teacher_expressed_in_the_factored_space_scores_high_and_random_play_low() -> None:
    teacher, rand = [], []
    for seed in range(8):
        # The teacher's indices, replayed from the same reset (how behaviour cloning records them).
        env = StructuredControlBenchEnv(**HELD_OUT)
        env.reset(seed=seed)
        indices = env.env.teacher_play()
        env.reset(seed=seed)
        for i in indices:
            _, _, terminated, truncated, info = env.step(i)
        assert terminated, f"seed {seed}: the teacher submits"
        # Where the draw came from, once it is over: a held-out template and generator.
        assert info["task"]["template_split"] == "test" and info["task"]["generator_split"] == "test", info["task"]
        assert info["task"]["generator"] and info["task"]["family"], info["task"]
        teacher.append(info["final_score"])
        rand.append(play(StructuredControlBenchEnv(**HELD_OUT), seed, random_legal(random.Random(seed)))["score"])
    assert np.mean(teacher) >= 0.8, teacher
    assert np.mean(rand) <= 0.2, rand


def test_a_policy_that_never_submits_earns_no_positive_return() -> None:
    # The return is the score less the action costs: stalling (reading and intervening, never
    # deciding) earns no score, so its return cannot be positive, however long it goes on —
    # until the episode is truncated or nothing but a decision is left to play.
    for seed in range(4):
        env = StructuredControlBenchEnv(**HELD_OUT)
        obs, _ = env.reset(seed=seed)
        rng, total, steps = random.Random(seed), 0.0, 0
        for steps in range(STEP_CAP):
            legal = [i for i in np.flatnonzero(obs["action_mask"])
                     if not (ACTION_NAMES[i].startswith("decide.") or ACTION_NAMES[i] == "submit")]
            if not legal:
                break
            obs, reward, terminated, truncated, info = env.step(rng.choice(legal))
            total += reward
            assert info["final_score"] == 0.0
            if terminated or truncated:
                break
        assert steps > 5 and total <= 1e-9, (seed, steps, total)


def test_vector_env_batches_and_keeps_a_legal_action_on_every_row() -> None:
    vec = gym.make_vec(CB, num_envs=3, vectorization_mode="vector_entry_point", observation_mode="structured", **HELD_OUT)
    assert isinstance(vec, StructuredControlBenchVectorEnv)
    obs, _ = vec.reset(seed=5)
    assert obs["rows"].shape == (3, MAX_ROWS, ROW_FEATURES)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(1_500):
        mask = obs["action_mask"].astype(bool)
        assert mask.any(axis=1).all(), "every row has a legal action, ended rows included"
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, rewards, terminated, truncated, _ = vec.step(actions)
        assert np.isfinite(rewards).all()
        ended += int(terminated.sum() + truncated.sum())
    assert ended >= 3
    vec.close()


def test_vector_rows_are_the_single_env_step_for_step() -> None:
    """Each row of the vector env is, byte for byte, the single structured env replaying that
    row's episodes (its task draws' seeds, its actions): the global and row features, the masks,
    rewards and end flags, resets included. The row that ends an episode already carries the
    reset's masks (next-step autoreset), so only its features are compared there."""
    n = 3
    vec = StructuredControlBenchVectorEnv(num_envs=n, threads=2)
    obs, _ = vec.reset(seed=21)
    rng = np.random.default_rng(4)
    # Per row: finished episodes as (seed, [(action, obs, reward, terminated, truncated)]).
    episodes: List[List[tuple]] = [[] for _ in range(n)]
    first: List[Dict[str, np.ndarray]] = [{k: v[i].copy() for k, v in obs.items()} for i in range(n)]
    current: List[list] = [[] for _ in range(n)]
    resetting = np.zeros(n, dtype=bool)
    for _ in range(300):
        mask = obs["action_mask"].astype(bool)
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, rewards, terminated, truncated, _ = vec.step(actions)
        for i in range(n):
            row = {k: v[i].copy() for k, v in obs.items()}
            if resetting[i]:
                assert rewards[i] == 0.0 and not terminated[i] and not truncated[i]
                first[i] = row
                continue
            current[i].append((int(actions[i]), row, float(rewards[i]), bool(terminated[i]), bool(truncated[i])))
            if terminated[i] or truncated[i]:
                seed = vec.finished(i)["task"]["seed"]
                episodes[i].append((seed, first[i], current[i]))
                current[i] = []
        resetting = terminated | truncated
    assert sum(len(e) for e in episodes) >= n, "every row finished an episode"
    env = StructuredControlBenchEnv()
    for i in range(n):
        for seed, start, steps in episodes[i]:
            got, _ = env.reset(options={"seed": seed})
            for k in start:
                assert got[k].tobytes() == start[k].tobytes(), (i, seed, k)
            for t, (action, row, reward, term, trunc) in enumerate(steps):
                got, r, te, tr, _ = env.step(action)
                assert (r, te, tr) == (reward, term, trunc), (i, seed, t)
                keys = ("global", "rows") if te or tr else tuple(row)
                for k in keys:
                    assert got[k].tobytes() == row[k].tobytes(), (i, seed, t, k)
    vec.close()
