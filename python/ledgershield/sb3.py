"""Stable-Baselines3 over the Rust vector environments: :class:`RustVecEnv` is an SB3 ``VecEnv``
(``pip install stable-baselines3``; ``sb3-contrib`` for ``MaskablePPO``)::

    from stable_baselines3 import PPO
    from ledgershield.sb3 import RustVecEnv

    venv = RustVecEnv("LedgerShield/ControlBench-v0", num_envs=8, template_split="train")
    PPO("MultiInputPolicy", venv, n_steps=64).learn(2_000)

It steps N environments in one native call (``ledgershield.vector``), with SB3's conventions:
``reset()`` returns the observations only (its infos in ``reset_infos``), an episode that ends
is reset in the same step (its last observation in ``infos[i]["terminal_observation"]``,
``infos[i]["TimeLimit.truncated"]`` for a truncation, its score in ``infos[i]["final_score"]`` and,
for a task draw, its provenance in ``infos[i]["task"]``), rewards are float32. ``action_masks()``
(also through ``env_method("action_masks")`` and ``get_attr``) gives every environment's legal
candidates for sb3-contrib's ``MaskablePPO``. The observation and action spaces are the vector
env's single spaces, whatever observation or action mode it has.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Type, Union

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

from .vector import AuditVectorEnv, ControlBenchVectorEnv, _NativeVectorEnv

VECTOR_ENVS = {"LedgerShield/ControlBench-v0": ControlBenchVectorEnv, "LedgerShield/Audit-v0": AuditVectorEnv}
# Methods of one environment that `env_method` answers per index.
PER_ENV_METHODS = ("action_masks", "candidates", "finished")


class RustVecEnv(VecEnv):
    """An SB3 ``VecEnv`` over a LedgerShield vector env: ``env_id`` (and the vector env's keyword
    arguments: ``num_envs``, ``observation`` options, splits, ``threads``, ...), or an existing
    vector env built with ``autoreset_mode=AutoresetMode.SAME_STEP``."""

    def __init__(self, env_id: Union[str, _NativeVectorEnv] = "LedgerShield/ControlBench-v0", num_envs: int = 1,
                 **vector_kwargs: Any) -> None:
        if isinstance(env_id, _NativeVectorEnv):
            venv = env_id
            if venv.autoreset_mode != AutoresetMode.SAME_STEP:
                raise ValueError("RustVecEnv needs a vector env with autoreset_mode=AutoresetMode.SAME_STEP (SB3 resets in the step that ends an episode)")
        else:
            if env_id not in VECTOR_ENVS:
                raise ValueError(f"unknown env_id {env_id!r}; one of {', '.join(VECTOR_ENVS)}")
            venv = VECTOR_ENVS[env_id](num_envs=num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **vector_kwargs)
        self.venv = venv
        self.render_mode = None
        self._actions: Optional[np.ndarray] = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)

    def reset(self) -> VecEnvObs:
        seed = self._seeds[0] if self._seeds and self._seeds[0] is not None else None
        obs, infos = self.venv.reset(seed=seed, options=self._options[0] or None)
        self.reset_infos = [self._info(infos, i) for i in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        assert self._actions is not None, "step_async first"
        obs, reward, terminated, truncated, infos = self.venv.step(self._actions)
        self._actions = None
        dones = terminated | truncated
        out: List[Dict[str, Any]] = [self._info(infos, i) for i in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            out[i]["terminal_observation"] = infos["final_obs"][i]
            out[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            ended = self.venv.finished(int(i)) or {}
            out[i]["final_score"] = float(ended.get("final_score", 0.0))
            if ended.get("task") is not None:
                out[i]["task"] = ended["task"]
        return obs, reward.astype(np.float32), dones, out

    @staticmethod
    def _info(infos: Dict[str, Any], i: int) -> Dict[str, Any]:
        """Environment ``i``'s entries of a Gymnasium batched info dict (the entries its mask
        ``_key`` marks as present)."""
        out: Dict[str, Any] = {}
        for k, v in infos.items():
            if k.startswith("_") or k in ("final_obs", "final_info"):
                continue
            mask = infos.get(f"_{k}")
            if mask is None or mask[i]:
                out[k] = v[i]
        return out

    def action_masks(self) -> np.ndarray:
        """``(num_envs, n_actions)`` booleans: every environment's legal candidates now."""
        return self.venv.action_masks()

    def close(self) -> None:
        self.venv.close()

    def _indices(self, indices: VecEnvIndices) -> List[int]:
        return list(self._get_indices(indices))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> List[Any]:
        """An attribute for each environment: a per-environment method (``action_masks``,
        ``candidates``, ``finished``) as a bound callable, else the vector env's attribute."""
        idx = self._indices(indices)
        if attr_name in PER_ENV_METHODS:
            return [(lambda *a, _i=i, **k: self.env_method(attr_name, *a, indices=[_i], **k)[0]) for i in idx]
        value = getattr(self.venv, attr_name)
        return [value for _ in idx]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any) -> List[Any]:
        """``action_masks`` (each environment's mask), ``candidates`` and ``finished`` (each
        environment's, by index); any other method of the vector env is called once and its
        result given to every index."""
        idx = self._indices(indices)
        if method_name == "action_masks":
            masks = self.venv.action_masks()
            return [masks[i] for i in idx]
        if method_name in ("candidates", "finished"):
            fn = getattr(self.venv, method_name)
            return [fn(i, *method_args, **method_kwargs) for i in idx]
        result = getattr(self.venv, method_name)(*method_args, **method_kwargs)
        return [result for _ in idx]

    def env_is_wrapped(self, wrapper_class: Type[gymnasium.Wrapper], indices: VecEnvIndices = None) -> List[bool]:
        return [False for _ in self._indices(indices)]

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        return [None for _ in range(self.num_envs)]

    def seed(self, seed: Optional[int] = None) -> Sequence[Union[None, int]]:
        """Seed the next reset: environment ``i`` then draws its reset seeds from its own stream
        of ``seed`` (the vector env's seeding; SB3's list ``seed + i`` is returned as usual)."""
        return super().seed(seed)

