"""The Gymnasium environments and vector envs over the in-process environments."""

from __future__ import annotations

import json
import random
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import ledgershield  # noqa: F401  (registers the ids)
from ledgershield.native import RL_VECTOR_LEN, ControlBenchEnv
from ledgershield.vector import AuditVectorEnv, ControlBenchVectorEnv

CONFIGS = [
    ("LedgerShield/ControlBench-v0", {}),
    ("LedgerShield/ControlBench-v0", {"observation_mode": "dict"}),
    ("LedgerShield/ControlBench-v0", {"observation_mode": "dict", "track_mode": "instrumented", "render_mode": "ansi"}),
    ("LedgerShield/Audit-v0", {}),
    ("LedgerShield/Audit-v0", {"observation_mode": "dict", "task_id": "fraud_detection", "render_mode": "ansi"}),
]


@pytest.mark.parametrize("env_id,kwargs", CONFIGS)
def test_check_env_passes(env_id: str, kwargs: dict) -> None:
    env = gym.make(env_id, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbounded Box features are warned about, not errors
        check_env(env.unwrapped, skip_render_check=False)
    obs, info = env.reset(seed=5)
    assert env.observation_space.contains(obs)
    assert info["candidates"] and int(info["action_mask"].sum()) == len(info["candidates"])
    if kwargs.get("render_mode") == "ansi":
        assert isinstance(env.render(), str) and env.render()


def test_an_episode_by_index_and_by_typed_json() -> None:
    env = gym.make("LedgerShield/ControlBench-v0", case_id="CASE-D-001")
    text, info = env.reset(seed=1)
    assert "CASE-D-001" in text
    names = [c["action_type"] for c in info["candidates"]]
    _, reward, terminated, truncated, info = env.step(names.index("inspect_email_thread"))
    assert not terminated and not truncated and info["env_info"]["tool_name"] == "inspect_email_thread"
    submit = [i for i, c in enumerate(info["candidates"]) if c["payload"].get("decision") == "ESCALATE_FRAUD"][0]
    _, reward, terminated, truncated, info = env.step(submit)
    assert terminated and not truncated and 0 < reward and info["candidates"] == []
    typed = gym.make("LedgerShield/ControlBench-v0", action_mode="json", case_id="CASE-D-001")
    typed.reset(seed=1)
    _, _, _, _, info = typed.step({"action_type": "inspect_email_thread", "payload": {"thread_id": "THR-100"}})
    assert info["env_info"]["tool_name"] == "inspect_email_thread"
    _, r2, t2, _, _ = typed.step(json.dumps({"action_type": "submit_decision", "payload": {
        "decision": "ESCALATE_FRAUD", "confidence": 0.8, "reason_codes": []}}))
    assert t2 and r2 == reward


def test_an_index_past_the_candidates_is_a_penalised_step() -> None:
    env = gym.make("LedgerShield/ControlBench-v0", observation_mode="dict")
    obs, info = env.reset(seed=2)
    obs, reward, terminated, truncated, info = env.step(len(info["candidates"]) + 3)
    assert reward < 0 and not terminated and obs["features"][15] == 0.0  # last action failed
    assert obs["features"][3] == 1.0  # it used a step


def test_dict_observation_carries_the_export_vector_only_when_instrumented() -> None:
    blind = gym.make("LedgerShield/ControlBench-v0", observation_mode="dict")
    obs, _ = blind.reset(seed=3)
    blind.step(0)
    obs, *_ = blind.step(0)
    assert obs["rl_vector"].shape == (RL_VECTOR_LEN,) and not obs["rl_vector"].any()
    inst = gym.make("LedgerShield/ControlBench-v0", observation_mode="dict", track_mode="instrumented")
    inst.reset(seed=3)
    obs, _, _, _, info = inst.step(0)
    exported = info["env_info"]["rl_data_plane"]["state_vector"]
    assert len(exported) == 37 and np.allclose(obs["rl_vector"], np.array(exported, dtype=np.float32))


def test_gym_reset_with_a_seed_reproduces_the_episode() -> None:
    seed = random.randrange(1, 100_000)
    print(f"gym seed {seed}")
    runs = []
    for _ in range(2):
        env = gym.make("LedgerShield/ControlBench-v0", render_mode="ansi")
        env.reset(seed=seed)
        texts, done = [env.render()], False
        while not done:
            _, _, t, tr, _ = env.step(0)
            texts.append(env.render())
            done = t or tr
        runs.append(texts)
    assert runs[0] == runs[1]


def _terminal_index(candidates: list) -> int:
    return [i for i, c in enumerate(candidates) if c["action_type"] == "submit_decision"][0]


def test_vector_env_autoresets_on_the_next_step() -> None:
    vec = gym.make_vec("LedgerShield/ControlBench-v0", num_envs=3, vectorization_mode="vector_entry_point",
                       case_id="CASE-B-001")
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, _ = vec.reset(seed=11)
    assert obs["features"].shape == (3, 24) and obs["action_mask"].shape == (3, 64)
    submit = [_terminal_index(vec.unwrapped.candidates(i)) for i in range(3)]
    actions = np.array([submit[0], 0, submit[2]])
    obs, reward, terminated, truncated, _ = vec.step(actions)
    assert terminated.tolist() == [True, False, True] and not truncated.any()
    assert obs["action_mask"][0].sum() == 0 and obs["action_mask"][1].sum() > 0
    # The next step resets environments 0 and 2: their actions are ignored, reward 0.
    obs, reward, terminated, truncated, _ = vec.step(np.array([5, 0, 5]))
    assert reward[0] == 0.0 and reward[2] == 0.0 and reward[1] != 0.0
    assert not terminated.any() and not truncated.any()
    assert obs["features"][0, 3] == 0 and obs["features"][1, 3] == 2  # step counts
    assert vec.unwrapped.candidates(0) == vec.unwrapped.candidates(2)


def test_vector_replies_equal_single_envs_and_do_not_depend_on_threads() -> None:
    seed = random.randrange(1, 100_000)
    print(f"vector seed {seed}")
    results = []
    for threads in (1, 2):
        vec = ControlBenchVectorEnv(num_envs=4, threads=threads, with_text=True)
        _, infos = vec.reset(seed=seed)
        replies = [list(infos["reply"])]
        rng = np.random.default_rng(seed)
        for _ in range(12):
            obs, _, _, _, infos = vec.step(rng.integers(0, 8, size=4))
            replies.append(list(infos["reply"]))
        results.append(replies)
    assert results[0] == results[1]
    cases = {json.loads(r)["observation"]["case_id"] for r in results[0][0]}
    assert len(cases) > 1, "each environment draws its own reset seed"
    # A fixed case: each vector reply is what a single environment replies.
    vec = ControlBenchVectorEnv(num_envs=2, case_id="CASE-C-001", with_text=True)
    _, infos = vec.reset(seed=seed)
    single = ControlBenchEnv()
    assert infos["reply"][1] == single.reset_text(case_id="CASE-C-001", fresh_institution=True, seed=1)
    _, _, _, _, infos = vec.step(np.array([0, 0]))
    assert infos["reply"][1] == single.step_index_text(0)


def test_vector_env_json_actions_and_bad_input() -> None:
    vec = ControlBenchVectorEnv(num_envs=2, case_id="CASE-A-001", action_mode="json")
    vec.reset(seed=1)
    obs, reward, *_ = vec.step([{"action_type": "lookup_policy", "payload": {}}, {"action_type": "nope", "payload": {}}])
    assert reward[0] != reward[1]
    with pytest.raises(ValueError, match="environment 1: payload.doc_id: must be a string"):
        vec.step([{"action_type": "lookup_policy", "payload": {}}, {"action_type": "ocr", "payload": {"doc_id": [1]}}])
    with pytest.raises(ValueError, match="expected 2 actions"):
        vec.step([{"action_type": "lookup_policy", "payload": {}}])


def test_audit_vector_env_autoresets() -> None:
    vec = gym.make_vec("LedgerShield/Audit-v0", num_envs=2, vectorization_mode="vector_entry_point")
    obs, _ = vec.reset(seed=4)
    assert obs["features"].shape == (2, 13)
    obs, reward, terminated, truncated, _ = vec.step(np.array([0, 1]))  # 0 submits final
    assert terminated.tolist() == [True, False]
    obs, reward, terminated, truncated, _ = vec.step(np.array([1, 0]))
    assert reward[0] == 0.0 and obs["features"][0, 0] == 0 and terminated.tolist() == [False, True]
    steps = 0
    vec2 = AuditVectorEnv(num_envs=1)
    vec2.reset(seed=9)
    truncated = np.array([False])
    while not truncated[0]:
        _, _, terminated, truncated, _ = vec2.step(np.array([-1]))  # empty steps run out the budget
        steps += 1
        assert not terminated[0] and steps < 100


def test_the_base_classes_are_abstract() -> None:
    from ledgershield.gym_envs import _NativeGymEnv
    from ledgershield.vector import _NativeVectorEnv

    for base in (_NativeGymEnv, _NativeVectorEnv):
        with pytest.raises(TypeError, match="abstract"):
            base()  # type: ignore[abstract]

    class Half(_NativeVectorEnv):  # no _request
        pass

    with pytest.raises(TypeError, match="_request"):
        Half()  # type: ignore[abstract]


def test_vector_arrays_are_writable_and_not_reused_between_steps() -> None:
    vec = ControlBenchVectorEnv(num_envs=2, case_id="CASE-A-001")
    obs, _ = vec.reset(seed=3)
    before = obs["features"].copy()
    obs2, reward, terminated, _, _ = vec.step(np.array([0, 0]))
    obs["features"][:] = -1.0  # a trainer normalising in place
    obs2["features"][:, 0] += 0.0
    reward[:] = 0.0
    assert (obs2["features"][:, 3] == 1).all() and not (obs2["features"] == -1.0).any()
    assert before[:, 3].tolist() == [0, 0] and terminated.dtype == np.bool_
    obs3, _, _, _, _ = vec.step(np.array([0, 0]))
    assert (obs3["features"][:, 3] == 2).all() and (obs["features"] == -1.0).all()


def test_a_huge_num_envs_is_refused_not_an_abort() -> None:
    # Issue 47: 10**8 environments used to abort the interpreter allocating them.
    with pytest.raises(ValueError, match="num_envs must be 1 to 4096"):
        ControlBenchVectorEnv(num_envs=10**8)
    with pytest.raises(ValueError, match="num_envs must be 1 to 4096"):
        AuditVectorEnv(num_envs=0)
