"""The Gymnasium environments and vector envs over the in-process environments."""

from __future__ import annotations

import collections
import json
import math
import random
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import ledgershield  # noqa: F401  (registers the ids)
from ledgershield.native import AUDIT_MAX_CANDIDATES, RL_VECTOR_LEN, AuditEnv, ControlBenchEnv
from ledgershield.vector import MAX_VECTOR_ENVS, AuditVectorEnv, ControlBenchVectorEnv

CB, AUDIT = "LedgerShield/ControlBench-v0", "LedgerShield/Audit-v0"
MODES = [{"observation_mode": o, "action_mode": a} for o in ("text", "dict") for a in ("index", "json")]
CONFIGS = [(CB, m) for m in MODES] + [(AUDIT, dict(m, task_id="fraud_detection")) for m in MODES] + [
    (CB, {"observation_mode": "dict", "track_mode": "instrumented", "render_mode": "ansi"}),
    (CB, {"observation_mode": "dict", "render_mode": "rgb_array", "template_split": "validation"}),
    (CB, {"case_id": "CASE-D-001", "action_mode": "json"}),
    (CB, {"curriculum": True}),
    (AUDIT, {"observation_mode": "dict", "render_mode": "ansi"}),
]

# The documented proportions of the default task distribution (docs/python.md): families
# uniform; within a family, generators uniform among those that build it.
FAMILY_GENERATORS = {
    "task_a": ["curated"],
    "task_b": ["curated", "challenge", "holdout", "quarter", "fraudgen"],
    "task_c": ["curated", "challenge", "holdout", "quarter", "fraudgen"],
    "task_d": ["curated", "challenge", "holdout", "twins", "quarter", "fraudgen"],
    "task_e": ["curated", "challenge", "holdout", "twins", "quarter", "fraudgen"],
}
HELD_OUT_TEMPLATES = {"CASE-A-003", "CASE-A-004", "CASE-B-002", "CASE-B-005", "CASE-C-003", "CASE-C-004",
                      "CASE-D-003", "CASE-D-006"}


def _submit(info: dict) -> int:
    return [i for i, c in enumerate(info["candidates"]) if c["action_type"] == "submit_decision"][0]


@pytest.mark.parametrize("env_id,kwargs", CONFIGS)
def test_check_env_passes(env_id: str, kwargs: dict) -> None:
    """Gymnasium's own checker, for every observation and action mode, every render mode."""
    env = gym.make(env_id, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbounded Box features are warned about, not errors
        check_env(env.unwrapped, skip_render_check=False)
    obs, info = env.reset(seed=5)
    assert env.observation_space.contains(obs)
    assert info["candidates"] and int(info["action_mask"].sum()) == len(info["candidates"])
    assert env.unwrapped.action_masks().dtype == np.bool_
    assert env.action_space.contains(env.action_space.sample())
    if kwargs.get("render_mode") == "ansi":
        assert isinstance(env.render(), str) and env.render()
    if kwargs.get("render_mode") == "rgb_array":
        frame = env.render()
        assert frame.dtype == np.uint8 and frame.shape == (720, 960, 3) and (frame < 128).any()


def test_an_episode_by_index_and_by_typed_json() -> None:
    env = gym.make(CB, case_id="CASE-D-001", observation_mode="text")
    text, info = env.reset(seed=1)
    assert "CASE-D-001" in text
    names = [c["action_type"] for c in info["candidates"]]
    _, reward, terminated, truncated, info = env.step(names.index("inspect_email_thread"))
    assert not terminated and not truncated and json.loads(info["info_json"])["tool_name"] == "inspect_email_thread"
    assert "final_score" not in info and "task" not in info
    submit = [i for i, c in enumerate(info["candidates"]) if c["payload"].get("decision") == "ESCALATE_FRAUD"][0]
    _, reward, terminated, truncated, info = env.step(submit)
    assert terminated and not truncated and info["candidates"] == []
    assert info["final_score"] == json.loads(info["info_json"])["final_score"] > 0
    assert "task" not in info, "a case_id reset is no task draw"
    typed = gym.make(CB, action_mode="json", case_id="CASE-D-001")
    typed.reset(seed=1)
    _, _, _, _, info = typed.step({"action_type": "inspect_email_thread", "payload": {"thread_id": "THR-100"}})
    assert json.loads(info["info_json"])["tool_name"] == "inspect_email_thread"
    _, r2, t2, _, _ = typed.step(json.dumps({"action_type": "submit_decision", "payload": {
        "decision": "ESCALATE_FRAUD", "confidence": 0.8, "reason_codes": []}}))
    assert t2 and r2 == reward


def test_info_has_one_shape_at_every_step() -> None:
    """Reset, step and terminal infos carry the same keys with the same types (the terminal one
    adds final_score and task), so Gymnasium's vector envs can batch them."""
    env = gym.make(CB, observation_mode="dict")
    _, info = env.reset(seed=9)
    kinds = [{k: type(v) for k, v in info.items()}]
    done = False
    while not done:
        _, _, t, tr, info = env.step(0)
        done = t or tr
        kinds.append({k: type(v) for k, v in info.items()})
    base = {"candidates": list, "action_mask": np.ndarray, "info_json": str}
    assert all({k: v for k, v in k_.items() if k in base} == base for k_ in kinds)
    assert kinds[-1]["final_score"] is float and kinds[-1]["task"] is dict
    assert all(set(k_) == set(base) for k_ in kinds[:-1])


def test_gymnasium_sync_vector_env_runs_through_episode_ends() -> None:
    """``gymnasium.make_vec(..., vectorization_mode="sync")`` (Gymnasium's SyncVectorEnv over the
    single env) steps through many episode ends with masked random actions."""
    seed = random.randrange(1, 100_000)
    print(f"sync vector seed {seed}")
    for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        vec = gym.make_vec(CB, num_envs=3, vectorization_mode="sync", observation_mode="dict",
                           vector_kwargs={"autoreset_mode": mode})
        obs, infos = vec.reset(seed=seed)
        rng = np.random.default_rng(seed)
        ends = 0
        for _ in range(80):
            masks = obs["action_mask"].astype(bool)
            actions = [int(rng.choice(np.flatnonzero(m))) if m.any() else 0 for m in masks]
            obs, reward, term, trunc, infos = vec.step(actions)
            ends += int((term | trunc).sum())
            assert infos["info_json"].shape == (3,) and obs["features"].shape == (3, 24)
            if (term | trunc).any():
                final = infos if mode == AutoresetMode.NEXT_STEP else infos["final_info"]
                assert (final["_final_score"] == (term | trunc)).all()
        assert ends >= 3, ends
        vec.close()


def test_an_index_past_the_candidates_is_a_penalised_step() -> None:
    env = gym.make(CB, observation_mode="dict")
    obs, info = env.reset(seed=2)
    obs, reward, terminated, truncated, info = env.step(len(info["candidates"]) + 3)
    assert reward < 0 and not terminated and obs["features"][15] == 0.0  # last action failed
    assert obs["features"][3] == 1.0  # it used a step


def test_dict_observation_carries_the_export_vector_only_when_instrumented() -> None:
    blind = gym.make(CB, observation_mode="dict")
    obs, _ = blind.reset(seed=3)
    blind.step(0)
    obs, *_ = blind.step(0)
    assert obs["rl_vector"].shape == (RL_VECTOR_LEN,) and not obs["rl_vector"].any()
    inst = gym.make(CB, observation_mode="dict", track_mode="instrumented")
    inst.reset(seed=3)
    obs, _, _, _, info = inst.step(0)
    exported = json.loads(info["info_json"])["rl_data_plane"]["state_vector"]
    assert len(exported) == 37 and np.allclose(obs["rl_vector"], np.array(exported, dtype=np.float32))


def _play(env: gym.Env, seed: int) -> list:
    env.reset(seed=seed)
    texts, done = [env.render()], False
    while not done:
        _, _, t, tr, _ = env.step(0)
        texts.append(env.render())
        done = t or tr
    return texts


def test_gym_reset_with_a_seed_reproduces_the_episode_whatever_ran_before() -> None:
    """The issue's example: seed 7 used to give one case in a new env and another after ten
    earlier episodes (the curriculum's stagnation counter leaked). A seeded reset is now a pure
    function of the seed, for task draws and for fixed cases."""
    seed = random.randrange(1, 100_000)
    print(f"gym seed {seed}")
    for kwargs in ({}, {"template_split": "train"}, {"case_id": "CASE-B-003"}):
        fresh = _play(gym.make(CB, render_mode="ansi", **kwargs), seed)
        used = gym.make(CB, render_mode="ansi", **kwargs)
        for s in range(10):
            _play(used, s)
        assert _play(used, seed) == fresh, kwargs
        assert _play(used, 7) == _play(gym.make(CB, render_mode="ansi", **kwargs), 7)


def test_the_curriculum_is_opt_in_and_persists_across_episodes() -> None:
    """``curriculum=True`` is the server's seeded reset in one session: the curriculum counts
    the episodes; by default each reset is a new session, so it never does."""
    for kwargs, count in (({"curriculum": True}, 12), ({}, 0)):
        env = gym.make(CB, **kwargs)
        for s in range(12):
            _, info = env.reset(seed=s)
            env.step(_submit(info))
        _, info = env.reset(seed=99)
        assert json.loads(info["info_json"])["curriculum"]["episode_count"] == count, kwargs
    with pytest.raises(ValueError, match="curriculum"):
        gym.make(CB, curriculum=True, template_split="train")


def _draws(n: int, base: int, **kwargs) -> list:
    env = gym.make(CB, observation_mode="dict", **kwargs)
    out = []
    for seed in range(base, base + n):
        _, info = env.reset(seed=seed)
        _, _, t, _, info = env.step(_submit(info))
        assert t
        out.append(info["task"])
    return out


def test_a_thousand_default_resets_cover_every_family_and_generator_in_the_documented_proportions() -> None:
    base = random.randrange(1, 10**6)
    print(f"coverage seeds from {base}")
    n = 1000
    draws = _draws(n, base)
    fam = collections.Counter(d["family"] for d in draws)
    gen = collections.Counter(d["generator"] for d in draws)
    expected_gen = collections.Counter()
    for f, gens in FAMILY_GENERATORS.items():
        for g in gens:
            expected_gen[g] += 0.2 / len(gens)

    def near(count: int, p: float, what: str) -> None:
        se = math.sqrt(p * (1 - p) / n)
        assert abs(count / n - p) <= 4.5 * se, f"{what}: {count / n:.3f} vs {p:.3f} (seeds from {base})"

    for f in FAMILY_GENERATORS:
        near(fam[f], 0.2, f)
    for g, p in expected_gen.items():
        near(gen[g], p, g)
    assert set(gen) == set(expected_gen)
    assert all(d["template_split"] == "all" and d["generator_split"] == "all" for d in draws)


def test_splits_are_disjoint_through_the_gym_env() -> None:
    base = random.randrange(1, 10**6)
    print(f"split seeds from {base}")
    for d in _draws(300, base, template_split="train"):
        assert d["template"] not in HELD_OUT_TEMPLATES, d
    for d in _draws(60, base, template_split="validation"):
        assert d["template"] in HELD_OUT_TEMPLATES and d["generator"] != "fraudgen", d
    assert {d["generator"] for d in _draws(40, base, generator_split="validation")} == {"twins"}
    assert {d["generator"] for d in _draws(40, base, generator_split="test")} == {"holdout"}
    with pytest.raises(ValueError, match="template_split"):
        gym.make(CB, template_split="dev")
    env = ControlBenchEnv()
    with pytest.raises(ValueError, match="cannot be combined"):
        env.reset(template_split="train", case_id="CASE-A-001")


def test_the_native_env_draws_tasks_when_asked_and_otherwise_serves_the_server_reset() -> None:
    env = ControlBenchEnv()
    a = env.reset_text(seed=11, template_split="all")
    b = ControlBenchEnv().reset_text(seed=11, template_split="all", generator_split="all")
    assert a == b
    assert env.task() is None, "not shown before the end"
    env.step({"action_type": "submit_decision", "payload": {"decision": "HOLD", "confidence": 0.5}})
    task = env.task()
    assert task is not None and task["seed"] == 11 and task["family"].startswith("task_")
    server_like = ControlBenchEnv().reset(seed=11)
    assert server_like["observation"]["case_id"] in {f"CASE-{f}-00{i}" for f in "AB" for i in range(1, 6)}


def _terminal_index(candidates: list) -> int:
    return [i for i, c in enumerate(candidates) if c["action_type"] == "submit_decision"][0]


def test_vector_env_autoresets_on_the_next_step_with_the_resets_mask() -> None:
    vec = gym.make_vec(CB, num_envs=3, vectorization_mode="vector_entry_point", case_id="CASE-B-001")
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, _ = vec.reset(seed=11)
    assert obs["features"].shape == (3, 24) and obs["action_mask"].shape == (3, 64)
    start_mask = obs["action_mask"][0].copy()
    submit = [_terminal_index(vec.unwrapped.candidates(i)) for i in range(3)]
    actions = np.array([submit[0], 0, submit[2]])
    obs, reward, terminated, truncated, _ = vec.step(actions)
    assert terminated.tolist() == [True, False, True] and not truncated.any()
    # The ended rows carry the reset's mask (the next action is ignored, but a masked policy
    # needs a legal entry), the terminal observation otherwise.
    assert (obs["action_mask"][0] == start_mask).all() and obs["features"][0, 17] == 1.0
    assert vec.unwrapped.action_masks()[0].any()
    # The next step reports the resets of environments 0 and 2: their actions are ignored, reward 0.
    obs, reward, terminated, truncated, _ = vec.step(np.array([5, 0, 5]))
    assert reward[0] == 0.0 and reward[2] == 0.0 and reward[1] != 0.0
    assert not terminated.any() and not truncated.any()
    assert obs["features"][0, 3] == 0 and obs["features"][1, 3] == 2  # step counts
    assert (obs["action_mask"][0] == start_mask).all()
    assert vec.unwrapped.candidates(0) == vec.unwrapped.candidates(2)


def test_same_step_autoreset_equals_next_step_without_the_reset_call() -> None:
    """SAME_STEP returns at the ending step the reset NEXT_STEP reports one call later, and the
    ended observation (and reply) in ``final_obs`` / ``final_info``."""
    seed = random.randrange(1, 100_000)
    print(f"same-step seed {seed}")
    nxt = ControlBenchVectorEnv(num_envs=1, with_text=True)
    same = ControlBenchVectorEnv(num_envs=1, with_text=True, autoreset_mode=AutoresetMode.SAME_STEP)
    assert same.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    _, i1 = nxt.reset(seed=seed)
    _, i2 = same.reset(seed=seed)
    assert list(i1["reply"]) == list(i2["reply"])
    rng = np.random.default_rng(seed)
    ends = 0
    for _ in range(60):
        a = rng.integers(0, 6, size=1)
        o1, r1, t1, u1, i1 = nxt.step(a)
        o2, r2, t2, u2, i2 = same.step(a)
        assert (r1 == r2).all() and (t1 == t2).all() and (u1 == u2).all()
        if t1[0] or u1[0]:
            ends += 1
            assert i2["_final_obs"].tolist() == [True]
            assert (i2["final_obs"][0]["features"] == o1["features"][0]).all()
            assert i2["final_info"]["reply"][0] == i1["reply"][0]
            o1, r1, _, _, i1 = nxt.step(a)  # NEXT_STEP's reset row
            assert r1[0] == 0.0
        assert (o1["features"] == o2["features"]).all() and (o1["action_mask"] == o2["action_mask"]).all()
        assert list(i1["reply"]) == list(i2["reply"])
    assert ends > 0
    # With several environments, the rows that did not end keep their step's reply.
    many = ControlBenchVectorEnv(num_envs=3, with_text=True, autoreset_mode=AutoresetMode.SAME_STEP)
    many.reset(seed=seed)
    submit = _terminal_index(many.candidates(0))
    obs, _, term, _, infos = many.step(np.array([submit, 0, 0]))
    assert term.tolist() == [True, False, False]
    replies = [json.loads(r) for r in infos["reply"]]
    assert replies[0]["observation"]["step_count"] == 0 and not replies[0]["done"]
    assert [r["observation"]["step_count"] for r in replies[1:]] == [1, 1]
    assert json.loads(infos["final_info"]["reply"][0])["done"]


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


def test_vector_task_draws_equal_single_env_draws() -> None:
    """A vector's task draw is the single env's draw for the same seed: the first reset of
    environment i uses its stream's first seed, which ``finished`` reports after the end."""
    vec = ControlBenchVectorEnv(num_envs=2, template_split="train", with_text=True)
    _, infos = vec.reset(seed=5)
    submit = [_terminal_index(vec.candidates(i)) for i in range(2)]
    vec.step(np.array(submit))
    for i in range(2):
        ended = vec.finished(i)
        task = ended["task"]
        assert ended["terminated"] and 0 < ended["final_score"] < 1
        assert task["template_split"] == "train" and task["template"] not in HELD_OUT_TEMPLATES
        single = ControlBenchEnv()
        assert single.reset_text(seed=task["seed"], template_split="train") == infos["reply"][i]


def test_vector_env_json_actions_and_bad_input() -> None:
    vec = ControlBenchVectorEnv(num_envs=2, case_id="CASE-A-001", action_mode="json")
    vec.reset(seed=1)
    obs, reward, *_ = vec.step([{"action_type": "lookup_policy", "payload": {}}, {"action_type": "nope", "payload": {}}])
    assert reward[0] != reward[1]
    with pytest.raises(ValueError, match="environment 1: payload.doc_id: must be a string"):
        vec.step([{"action_type": "lookup_policy", "payload": {}}, {"action_type": "ocr", "payload": {"doc_id": [1]}}])
    with pytest.raises(ValueError, match="expected 2 actions"):
        vec.step([{"action_type": "lookup_policy", "payload": {}}])


@pytest.mark.parametrize("n", [0, -1, MAX_VECTOR_ENVS + 1, 10**8, 10**30])
def test_an_impossible_vector_size_raises_value_error(n: int) -> None:
    with pytest.raises(ValueError, match="num_envs must be between 1 and"):
        ControlBenchVectorEnv(num_envs=n)
    with pytest.raises(ValueError, match="num_envs must be between 1 and"):
        AuditVectorEnv(num_envs=n)
    from ledgershield import _native

    if 0 <= n < 2**64:
        with pytest.raises(ValueError, match="num_envs must be between 1 and"):
            _native.ControlBenchVector(n, "blind", None)


def test_audit_vector_env_autoresets() -> None:
    vec = gym.make_vec(AUDIT, num_envs=2, vectorization_mode="vector_entry_point")
    obs, _ = vec.reset(seed=4)
    assert obs["features"].shape == (2, 13)
    obs, reward, terminated, truncated, _ = vec.step(np.array([0, 1]))  # 0 submits final
    assert terminated.tolist() == [True, False] and obs["action_mask"][0].any()
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


def test_the_audit_env_reports_its_grade_and_no_task_fills_the_candidate_space() -> None:
    env = gym.make(AUDIT, task_id="fraud_detection", observation_mode="dict")
    obs, info = env.reset(seed=3)
    n = len(info["candidates"])
    records = int(obs["features"][4])
    assert n > 1024 and n < AUDIT_MAX_CANDIDATES, n
    assert obs["action_mask"].shape == (AUDIT_MAX_CANDIDATES,) and obs["action_mask"].sum() == n
    assert records == 110 and n == 1 + records * 10
    _, _, t, _, info = env.step(1)
    assert not t and "grade" not in info
    _, _, t, _, info = env.step(0)
    assert t and info["final_score"] == info["grade"]["score"] and "f1" in json.dumps(info["grade"]).lower()
    gst = AuditEnv()
    gst.reset(task_id="gst_reconciliation", seed=3)
    docs = {c["findings"][0]["document_id"] for c in gst.candidates()[1:]}
    assert len(gst.candidates()) == 1 + len(docs) * 12 < AUDIT_MAX_CANDIDATES


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
    with pytest.raises(ValueError, match="num_envs must be between 1 and 4096"):
        ControlBenchVectorEnv(num_envs=10**8)
    with pytest.raises(ValueError, match="num_envs must be between 1 and 4096"):
        AuditVectorEnv(num_envs=0)
