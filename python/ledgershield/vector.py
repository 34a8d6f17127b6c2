"""Vector environments: N in-process episodes stepped in Rust worker threads in one call.

``ControlBenchVectorEnv`` and ``AuditVectorEnv`` are ``gymnasium.vector.VectorEnv`` s with
Gymnasium's conventions: batched ``Dict`` observations (``features``, ``action_mask`` and for
ControlBench ``rl_vector``, one row per environment), ``MultiDiscrete`` actions (each an index into
that environment's legal candidates; ``action_mode="json"`` takes a list of typed actions
instead), and next-step autoreset (``metadata["autoreset_mode"]`` is ``NEXT_STEP``): the step
after an episode ended resets that environment, ignores its action and reports reward 0, neither
terminated nor truncated. ``gymnasium.make_vec("LedgerShield/ControlBench-v0", num_envs=N)``
builds one.

With ``reset(seed=s)`` environment ``i`` draws its reset seeds from its own stream of ``s``, so a
seeded run is reproducible whatever the thread count; ``with_text=True`` adds each reply's JSON
text (the server's bytes) as ``infos["reply"]``.
"""

from __future__ import annotations

import abc
import json
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from . import _native, native
from .native import _action_text


class _NativeVectorEnv(VectorEnv, abc.ABC):
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
    _features: int
    _max_candidates: int
    _rl: int

    def _setup(self, num_envs: int, action_mode: str, with_text: bool) -> None:
        if action_mode not in ("index", "json"):
            raise ValueError(f"action_mode must be 'index' or 'json', not {action_mode!r}")
        self.num_envs = num_envs
        self.action_mode = action_mode
        self.with_text = with_text
        d = {"features": spaces.Box(-np.inf, np.inf, (self._features,), np.float32),
             "action_mask": spaces.MultiBinary(self._max_candidates)}
        if self._rl:
            d["rl_vector"] = spaces.Box(-np.inf, np.inf, (self._rl,), np.float32)
        self.single_observation_space = spaces.Dict(d)
        self.single_action_space = spaces.Discrete(self._max_candidates)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def _unpack(self, out: Tuple[Any, ...]) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        # Each array arrives as a fresh bytearray of this call: viewed in place (writable, no
        # copy), never reused by a later call.
        f, r, m, rew, term, trunc, texts = out
        n = self.num_envs
        obs = {"features": np.frombuffer(f, dtype=np.float32).reshape(n, self._features),
               "action_mask": np.frombuffer(m, dtype=np.int8).reshape(n, self._max_candidates)}
        if self._rl:
            obs["rl_vector"] = np.frombuffer(r, dtype=np.float32).reshape(n, self._rl)
        infos: Dict[str, Any] = {}
        if texts is not None:
            infos["reply"] = np.array(texts, dtype=object)
            infos["_reply"] = np.ones(n, dtype=bool)
        return (obs, np.frombuffer(rew, dtype=np.float64), np.frombuffer(term, dtype=np.bool_),
                np.frombuffer(trunc, dtype=np.bool_), infos)

    @abc.abstractmethod
    def _request(self, options: Optional[Dict[str, Any]]) -> str:
        """The reset body (JSON text) of a reset with these options."""

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
        if seed is not None and not isinstance(seed, (int, np.integer)):
            raise TypeError("seed must be an int (environment i draws from its own stream of it) or None")
        out = self._vec.reset(self._request(options), None if seed is None else int(seed), self.with_text)
        obs, _, _, _, infos = self._unpack(out)
        return obs, infos

    def step(self, actions: Any) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        if self.action_mode == "index":
            out = self._vec.step(np.asarray(actions, dtype=np.int64).reshape(self.num_envs).tolist(), self.with_text)
        else:
            out = self._vec.step_json([_action_text(a) for a in actions], self.with_text)
        return self._unpack(out)

    def candidates(self, i: int) -> List[Dict[str, Any]]:
        """Environment ``i``'s legal candidate actions, in index order."""
        return json.loads(self._vec.candidates(int(i)))


class ControlBenchVectorEnv(_NativeVectorEnv):
    """N ControlBench environments (each its own session: memory persists unless
    ``fresh_institution``, the default)."""

    _features = native.CONTROLBENCH_FEATURES
    _max_candidates = native.CONTROLBENCH_MAX_CANDIDATES
    _rl = native.RL_VECTOR_LEN

    def __init__(self, num_envs: int = 1, track_mode: str = "blind", threads: Optional[int] = None,
                 case_id: Optional[str] = None, track: Optional[str] = None, fresh_institution: bool = True,
                 action_mode: str = "index", with_text: bool = False, **_: Any) -> None:
        self._vec = _native.ControlBenchVector(int(num_envs), track_mode, threads)
        self.defaults = {"case_id": case_id, "track": track, "fresh_institution": fresh_institution}
        self._setup(int(num_envs), action_mode, with_text)

    def _request(self, options: Optional[Dict[str, Any]]) -> str:
        request = {k: v for k, v in self.defaults.items() if v is not None}
        request.update(options or {})
        return json.dumps(request)


class AuditVectorEnv(_NativeVectorEnv):
    """N Financial Audit episode environments."""

    _features = native.AUDIT_FEATURES
    _max_candidates = native.AUDIT_MAX_CANDIDATES
    _rl = 0

    def __init__(self, num_envs: int = 1, task_id: str = "expense_audit", investigation_mode: bool = False,
                 max_findings_per_step: int = 50, fraud_difficulty: str = "auto", threads: Optional[int] = None,
                 action_mode: str = "index", with_text: bool = False, **_: Any) -> None:
        self._vec = _native.AuditVector(int(num_envs), int(max_findings_per_step), fraud_difficulty, threads)
        self.defaults = {"task_id": task_id, "investigation_mode": investigation_mode, "episode_id": "vec"}
        self._setup(int(num_envs), action_mode, with_text)

    def _request(self, options: Optional[Dict[str, Any]]) -> str:
        request = dict(self.defaults)
        request.update(options or {})
        return json.dumps(request)


