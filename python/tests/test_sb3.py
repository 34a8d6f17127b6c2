"""Stable-Baselines3 and sb3-contrib, unmodified, over the Gymnasium env and the Rust vector env
(run where torch is installed: scripts/ci-training-smoke.sh; skipped elsewhere)."""

from __future__ import annotations

import random
import warnings

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("torch")
sb3 = pytest.importorskip("stable_baselines3")
sb3_contrib = pytest.importorskip("sb3_contrib")

import torch  # noqa: E402
from sb3_contrib import MaskablePPO  # noqa: E402
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecMonitor  # noqa: E402

import ledgershield  # noqa: E402,F401
from ledgershield.sb3 import RustVecEnv  # noqa: E402

CB, AUDIT = "LedgerShield/ControlBench-v0", "LedgerShield/Audit-v0"
torch.set_num_threads(1)


@pytest.mark.parametrize("env_id,kwargs", [(CB, {"observation_mode": "dict"}),
                                           (CB, {"observation_mode": "dict", "template_split": "train"}),
                                           (AUDIT, {"observation_mode": "dict", "task_id": "gst_reconciliation"})])
def test_sb3_check_env_passes(env_id: str, kwargs: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(gym.make(env_id, **kwargs).unwrapped, warn=False)


def test_make_vec_env_and_ppo_learn_on_the_single_env() -> None:
    """SB3's ``make_vec_env(ID)`` as written (it asks for ``render_mode="rgb_array"``), then PPO
    for a few thousand steps."""
    venv = make_vec_env(CB, n_envs=2, seed=1)
    assert venv.render_mode == "rgb_array" and venv.reset() is not None
    frames = venv.get_images()
    assert frames[0].shape == (720, 960, 3)
    venv = make_vec_env(CB, n_envs=2, seed=1, env_kwargs={"observation_mode": "dict", "template_split": "train"})
    model = PPO("MultiInputPolicy", venv, n_steps=256, batch_size=128, n_epochs=2, seed=1, device="cpu")
    model.learn(2048)
    assert model.num_timesteps >= 2048


def _legal_share(model, venv, steps: int) -> float:
    obs = venv.reset()
    legal = 0
    for _ in range(steps):
        masks = get_action_masks(venv)
        actions, _ = model.predict(obs, action_masks=masks, deterministic=False)
        legal += int(all(masks[i][a] for i, a in enumerate(actions)))
        obs, _, _, _ = venv.step(actions)
    return legal / steps


def test_maskable_ppo_reads_action_masks_from_the_single_env() -> None:
    """sb3-contrib's MaskablePPO over ``make_vec_env`` finds ``action_masks()`` on the env
    itself (no ActionMasker wrapper) and only plays legal candidates."""
    venv = make_vec_env(CB, n_envs=2, seed=2, env_kwargs={"observation_mode": "dict"})
    assert is_masking_supported(venv)
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=128, batch_size=64, n_epochs=2, seed=2, device="cpu")
    model.learn(1024)
    assert _legal_share(model, venv, 60) == 1.0


def test_the_rust_vec_env_is_an_sb3_vec_env() -> None:
    seed = random.randrange(1, 10_000)
    print(f"rust vec env seed {seed}")
    venv = RustVecEnv(CB, num_envs=4, template_split="train")
    assert venv.num_envs == 4 and venv.observation_space == venv.venv.single_observation_space
    venv.seed(seed)
    obs = venv.reset()
    assert obs["features"].shape == (4, 24) and len(venv.reset_infos) == 4
    masks = venv.env_method("action_masks")
    assert len(masks) == 4 and all(m.dtype == np.bool_ and m.any() for m in masks)
    assert venv.get_attr("num_envs") == [4] * 4 and venv.env_is_wrapped(gym.Wrapper) == [False] * 4
    assert len(venv.env_method("candidates", indices=[1])[0]) == int(masks[1].sum())
    ends, steps = 0, 0
    while ends < 6 and steps < 400:
        m = venv.action_masks()
        actions = np.array([np.flatnonzero(row)[-1] for row in m])  # the last candidate submits
        obs, rewards, dones, infos = venv.step(actions)
        steps += 1
        assert rewards.dtype == np.float32 and dones.shape == (4,)
        for i in np.flatnonzero(dones):
            ends += 1
            term = infos[i]["terminal_observation"]
            assert term["features"][17] == 1.0 and obs["features"][i, 3] == 0.0  # ended, then reset
            assert "final_score" in infos[i] and "TimeLimit.truncated" in infos[i]
            assert infos[i]["task"]["template_split"] == "train"
            assert venv.env_method("finished", indices=[int(i)])[0]["final_score"] == infos[i]["final_score"]
    assert ends >= 6
    # Seeded runs repeat.
    again = RustVecEnv(CB, num_envs=4, template_split="train")
    again.seed(seed)
    first = again.reset()
    venv.seed(seed)
    assert (venv.reset()["features"] == first["features"]).all()


def test_ppo_and_maskable_ppo_learn_on_the_rust_vec_env() -> None:
    venv = VecMonitor(RustVecEnv(CB, num_envs=8, template_split="train"))
    model = PPO("MultiInputPolicy", venv, n_steps=64, batch_size=128, n_epochs=2, seed=3, device="cpu")
    model.learn(2048)
    assert model.num_timesteps >= 2048 and len(model.ep_info_buffer) > 0
    masked = VecMonitor(RustVecEnv(CB, num_envs=8, template_split="train"))
    assert is_masking_supported(masked)
    model = MaskablePPO("MultiInputPolicy", masked, n_steps=64, batch_size=128, n_epochs=2, seed=3, device="cpu")
    model.learn(2048)
    assert _legal_share(model, masked, 40) == 1.0
    audit = VecMonitor(RustVecEnv(AUDIT, num_envs=4, task_id="fraud_detection"))
    model = MaskablePPO("MultiInputPolicy", audit, n_steps=32, batch_size=64, n_epochs=1, seed=3, device="cpu")
    model.learn(256)
    assert model.num_timesteps >= 256
