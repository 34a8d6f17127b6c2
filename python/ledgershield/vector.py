"""Vector environments: N in-process episodes stepped in Rust worker threads in one call.

``ControlBenchVectorEnv`` and ``AuditVectorEnv`` are ``gymnasium.vector.VectorEnv`` s with
Gymnasium's conventions: batched ``Dict`` observations (``features``, ``action_mask`` and for
ControlBench ``rl_vector``, one row per environment), ``MultiDiscrete`` actions (each an index into
that environment's legal candidates; ``action_mode="json"`` takes a list of typed actions
instead) and autoreset. ``gymnasium.make_vec("LedgerShield/ControlBench-v0", num_envs=N)`` builds
one.

Autoreset: ``autoreset_mode=AutoresetMode.NEXT_STEP`` (default): the step after an episode ended
reports that environment's reset, ignores its action and reports reward 0, neither terminated
nor truncated. The reset happens eagerly in Rust at the step that ended the episode, so the
ended row's ``action_mask`` (and ``candidates(i)``) are already the reset's: a masked policy
always has a legal entry to pick for the ignored action. ``AutoresetMode.SAME_STEP``: the step
that ends an episode returns the reset's observation, the ended one in ``infos["final_obs"]``
(and the reply texts in ``infos["final_info"]["reply"]`` with ``with_text``).

ControlBench resets draw from the task distribution by default (``template_split`` /
``generator_split``, docs/python.md); ``case_id`` plays one case; ``curriculum=True`` uses the
server's seeded reset with the curriculum and the institution carried across episodes. With
``reset(seed=s)`` environment ``i`` draws its reset seeds from its own stream of ``s``, so a
seeded run is reproducible whatever the thread count; ``with_text=True`` adds each reply's JSON
text (the server's bytes) as ``infos["reply"]``; ``finished(i)`` gives environment ``i``'s last
ended episode (case, score, where the case came from).
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
from .gym_envs import check_reset_options, controlbench_reset
from .native import _action_text

Batch = Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]
MAX_VECTOR_ENVS: int = _native.MAX_VECTOR_ENVS


def _num_envs(num_envs: Any) -> int:
    """``num_envs`` as an int in 1..=MAX_VECTOR_ENVS (each environment holds a session's
    institutional memory), else ``ValueError``."""
    n = int(num_envs)
    if not 1 <= n <= MAX_VECTOR_ENVS:
        raise ValueError(f"num_envs must be between 1 and {MAX_VECTOR_ENVS}, got {n}")
    return n


class _NativeVectorEnv(VectorEnv, abc.ABC):
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}
    _features: int
    _max_candidates: int
    _rl: int

    def _setup(self, num_envs: int, action_mode: str, with_text: bool, autoreset_mode: Any) -> None:
        if action_mode not in ("index", "json"):
            raise ValueError(f"action_mode must be 'index' or 'json', not {action_mode!r}")
        mode = AutoresetMode(autoreset_mode)
        if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
            raise ValueError(f"autoreset_mode must be NEXT_STEP or SAME_STEP, not {mode}")
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        self.autoreset_mode = mode
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
        self._mask = np.zeros((num_envs, self._max_candidates), dtype=np.int8)

    def _unpack(self, out: Tuple[Any, ...]) -> Batch:
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
        self._mask = obs["action_mask"]
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

    def step(self, actions: Any) -> Batch:
        if self.action_mode == "index":
            out = self._vec.step(np.asarray(actions, dtype=np.int64).reshape(self.num_envs).tolist(), self.with_text)
        else:
            out = self._vec.step_json([_action_text(a) for a in actions], self.with_text)
        obs, reward, terminated, truncated, infos = self._unpack(out)
        ended = terminated | truncated
        if self.autoreset_mode == AutoresetMode.SAME_STEP and ended.any():
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(ended):
                final_obs[i] = {k: v[i] for k, v in obs.items()}
            final_info: Dict[str, Any] = {}
            if "reply" in infos:
                final_info = {"reply": np.where(ended, infos["reply"], None), "_reply": ended.copy()}
            obs, _, _, _, reset_infos = self._unpack(self._vec.take_pending(self.with_text))
            if "reply" in infos:
                # The resets' replies where episodes ended, the step's elsewhere.
                infos["reply"] = np.where(ended, reset_infos["reply"], infos["reply"])
            infos.update({"final_obs": final_obs, "_final_obs": ended.copy(),
                          "final_info": final_info, "_final_info": ended.copy()})
        return obs, reward, terminated, truncated, infos

    def action_masks(self) -> np.ndarray:
        """The legal candidates of every environment's current observation, as booleans of
        shape ``(num_envs, max_candidates)`` (what sb3-contrib's ``MaskablePPO`` reads)."""
        return self._mask.astype(bool)

    def candidates(self, i: int) -> List[Dict[str, Any]]:
        """Environment ``i``'s legal candidate actions, in index order."""
        return json.loads(self._vec.candidates(int(i)))

    def finished(self, i: int) -> Optional[Dict[str, Any]]:
        """Environment ``i``'s last ended episode, or ``None``: ControlBench ``{"case_id",
        "final_score", "terminated", "truncated", "task"}`` (``task``: the task draw's generator,
        base template, family, seed and splits, ``None`` for other resets); audit ``{"task_id",
        "final_score", "terminated", "truncated"}``. ``final_score`` is 0 for an episode that
        ended without a grade."""
        text = self._vec.finished(int(i))
        return None if text is None else json.loads(text)


class ControlBenchVectorEnv(_NativeVectorEnv):
    """N ControlBench environments. Resets draw from the task distribution (each a new session);
    ``case_id`` plays one case (from a fresh institution unless ``fresh_institution=False``);
    ``curriculum=True`` is the server's seeded reset in each environment's own session."""

    _features = native.CONTROLBENCH_FEATURES
    _max_candidates = native.CONTROLBENCH_MAX_CANDIDATES
    _rl = native.RL_VECTOR_LEN

    def __init__(self, num_envs: int = 1, track_mode: str = "blind", threads: Optional[int] = None,
                 case_id: Optional[str] = None, track: Optional[str] = None, template_split: str = "all",
                 generator_split: str = "all", curriculum: bool = False, fresh_institution: Optional[bool] = None,
                 action_mode: str = "index", with_text: bool = False,
                 autoreset_mode: Any = AutoresetMode.NEXT_STEP, **_: Any) -> None:
        check_reset_options(template_split, generator_split, curriculum, fresh_institution)
        num_envs = _num_envs(num_envs)
        self._vec = _native.ControlBenchVector(num_envs, track_mode, threads)
        self.defaults = {"case_id": case_id, "track": track, "template_split": template_split,
                         "generator_split": generator_split, "curriculum": curriculum,
                         "fresh_institution": fresh_institution}
        self._setup(int(num_envs), action_mode, with_text, autoreset_mode)

    def _request(self, options: Optional[Dict[str, Any]]) -> str:
        return json.dumps(controlbench_reset(self.defaults, options))



class AuditVectorEnv(_NativeVectorEnv):
    """N Financial Audit episode environments."""

    _features = native.AUDIT_FEATURES
    _max_candidates = native.AUDIT_MAX_CANDIDATES
    _rl = 0

    def __init__(self, num_envs: int = 1, task_id: str = "expense_audit", investigation_mode: bool = False,
                 max_findings_per_step: int = 50, fraud_difficulty: str = "auto", threads: Optional[int] = None,
                 action_mode: str = "index", with_text: bool = False,
                 autoreset_mode: Any = AutoresetMode.NEXT_STEP, **_: Any) -> None:
        num_envs = _num_envs(num_envs)
        self._vec = _native.AuditVector(num_envs, int(max_findings_per_step), fraud_difficulty, threads)
        self.defaults = {"task_id": task_id, "investigation_mode": investigation_mode, "episode_id": "vec"}
        self._setup(int(num_envs), action_mode, with_text, autoreset_mode)

    def _request(self, options: Optional[Dict[str, Any]]) -> str:
        request = dict(self.defaults)
        request.update(options or {})
        return json.dumps(request)
