"""Gymnasium environments over the in-process environments (``import ledgershield`` registers
them)::

    import gymnasium as gym
    import ledgershield  # noqa: F401  (registers the ids)

    env = gym.make("LedgerShield/ControlBench-v0", observation_mode="dict")
    obs, info = env.reset(seed=7)
    obs, reward, terminated, truncated, info = env.step(0)     # info["candidates"][0]

Observations: ``observation_mode="text"`` (default) is the compact reply as text (what
``LedgerShieldToolEnv`` shows a model); ``"dict"`` is a ``Dict`` space of fixed-size arrays:
``features`` (float32; documented in docs/python.md), ``action_mask`` (int8, 1 for each legal
candidate) and, for ControlBench, ``rl_vector`` (the 37-entry RL export vector of instrumented
mode; zeros in the default blind mode, which exposes no belief state).

Actions: ``action_mode="index"`` (default) is ``Discrete``: an index into the legal candidate
actions of the current observation, listed in ``info["candidates"]`` (an index past the list is
played as an unknown action, a penalised step); ``"json"`` takes the typed action itself, as a
mapping or JSON text (``{"action_type", "payload"}``; for the audit env ``{"findings", "submit_final"}``).

Every reset starts from a fresh institution (``fresh_institution=True``) so that ``reset(seed=s)``
reproduces an episode whatever ran before; pass ``fresh_institution=False`` to let the
institution's memory carry across episodes, as one HTTP session does. ``render()``
(``render_mode="ansi"``) returns the compact text.
"""

from __future__ import annotations

import abc
import json
import string
from typing import Any, Dict, List, Optional, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces

from . import native
from .trl_env import _compact, _shrink, compact_result

TEXT_MAX_LENGTH = 1 << 20


class AnyText(spaces.Text):
    """A ``Text`` space holding any string up to ``max_length`` characters (replies carry
    Unicode from the documents; Gymnasium's ``Text`` checks a fixed character set)."""

    def __init__(self, max_length: int = TEXT_MAX_LENGTH) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=string.printable)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length


def controlbench_text(envelope: Dict[str, Any], first: bool) -> str:
    """The compact text of a ControlBench reply: the case on a reset, else status and the
    tool result without its echoes."""
    obs = envelope["observation"]
    if first:
        docs = ", ".join(f"{d['doc_id']} ({d['doc_type']}, {d['page_count']} page(s))" for d in obs["visible_documents"])
        return (f"Case {obs['case_id']} ({obs['task_type']}).\n{obs['instruction']}\n"
                f"Documents: {docs or 'none'}.\n"
                f"Budget {obs['budget_remaining']:g}/{obs['budget_total']:g}, at most {obs['max_steps']} steps. "
                "End the episode with submit_decision.")
    info = envelope.get("info", {})
    if envelope.get("done"):
        return _compact({"episode_over": True, "final_score": info.get("final_score"),
                         "result_class": info.get("result_class"),
                         "terminal_reason": info.get("terminal_reason", "submitted" if envelope.get("terminated") else None)})
    reply: Dict[str, Any] = {"budget_remaining": round(obs["budget_remaining"], 2),
                             "steps_left": max(obs["max_steps"] - obs["step_count"], 0)}
    if obs.get("pending_events"):
        reply["pending_events"] = len(obs["pending_events"])
    if obs.get("messages"):
        reply["messages"] = [_shrink(m) for m in obs["messages"][-3:]]
    result = obs.get("last_tool_result")
    reply["result"] = compact_result(result if isinstance(result, dict) else {"value": result})
    return _compact(reply, 6000)


def audit_text(envelope: Dict[str, Any], first: bool) -> str:
    """The compact text of an audit reply: the task and its documents on a reset, else the
    feedback (and the grade once done)."""
    obs = envelope["observation"]
    if first:
        docs = json.dumps(obs.get("documents", {}), ensure_ascii=False, separators=(",", ":"))
        return f"{obs['task_description']}\n{obs['feedback']}\nDocuments: {docs}"
    reply: Dict[str, Any] = {"feedback": obs.get("feedback"), "step": obs.get("step_number"),
                             "max_steps": obs.get("max_steps"), "findings": len(obs.get("findings_so_far", []))}
    if envelope.get("done") and isinstance(envelope.get("grader"), dict):
        reply["score"] = envelope["grader"].get("score")
    return _compact(reply, 6000)


class _NativeGymEnv(gymnasium.Env, abc.ABC):
    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    _max_candidates: int
    _features: int

    def __init__(self, observation_mode: str, action_mode: str, render_mode: Optional[str]) -> None:
        if observation_mode not in ("text", "dict"):
            raise ValueError(f"observation_mode must be 'text' or 'dict', not {observation_mode!r}")
        if action_mode not in ("index", "json"):
            raise ValueError(f"action_mode must be 'index' or 'json', not {action_mode!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        self.observation_mode = observation_mode
        self.action_mode = action_mode
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(self._max_candidates) if action_mode == "index" else AnyText()
        self.observation_space = AnyText() if observation_mode == "text" else self._dict_space()
        self._text = ""
        self._candidates: List[Dict[str, Any]] = []

    def _dict_space(self) -> spaces.Dict:
        return spaces.Dict({
            "features": spaces.Box(-np.inf, np.inf, (self._features,), np.float32),
            "action_mask": spaces.MultiBinary(self._max_candidates),
        })

    def _observe(self, text: str, first: bool) -> Tuple[Any, Dict[str, Any]]:
        envelope = json.loads(text)
        self._text = self._render_text(envelope, first)
        self._candidates = self.env.candidates()
        arrays = self.env.arrays()
        info = {"candidates": self._candidates, "action_mask": arrays["action_mask"],
                "env_info": envelope.get("info", {})}
        if self.observation_mode == "text":
            return self._text, info
        return {k: v for k, v in arrays.items() if k in self.observation_space.spaces}, info

    @abc.abstractmethod
    def _render_text(self, envelope: Dict[str, Any], first: bool) -> str:
        """The compact text of a reply; records the step's reward and end flags."""

    @abc.abstractmethod
    def _reset_request(self, options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """The reset fields of a reset with these options."""

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        super().reset(seed=seed)
        request = self._reset_request(options)
        request.setdefault("seed", int(self.np_random.integers(0, 2**31 - 1)))
        return self._observe(self.env.reset_text(**request), first=True)

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        if self.action_mode == "index":
            text = self.env.step_index_text(int(action))
        else:
            text = self.env.step_text(action)
        obs, info = self._observe(text, first=False)
        return obs, float(self._last_reward), bool(self._terminated), bool(self._truncated), info

    def render(self) -> Optional[str]:
        return self._text if self.render_mode == "ansi" else None


class ControlBenchGymEnv(_NativeGymEnv):
    """``LedgerShield/ControlBench-v0``: one ControlBench environment in process."""

    _max_candidates = native.CONTROLBENCH_MAX_CANDIDATES
    _features = native.CONTROLBENCH_FEATURES

    def __init__(self, observation_mode: str = "text", action_mode: str = "index", track_mode: str = "blind",
                 case_id: Optional[str] = None, track: Optional[str] = None, fresh_institution: bool = True,
                 render_mode: Optional[str] = None) -> None:
        self.env = native.ControlBenchEnv(track_mode)
        self.defaults = {"case_id": case_id, "track": track, "fresh_institution": fresh_institution}
        super().__init__(observation_mode, action_mode, render_mode)

    def _dict_space(self) -> spaces.Dict:
        d = super()._dict_space()
        d.spaces["rl_vector"] = spaces.Box(-np.inf, np.inf, (native.RL_VECTOR_LEN,), np.float32)
        return d

    def _reset_request(self, options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        request = {k: v for k, v in self.defaults.items() if v is not None}
        request.update(options or {})
        return request

    def _render_text(self, envelope: Dict[str, Any], first: bool) -> str:
        self._last_reward = envelope["reward"]
        self._terminated, self._truncated = envelope["terminated"], envelope["truncated"]
        return controlbench_text(envelope, first)


class AuditGymEnv(_NativeGymEnv):
    """``LedgerShield/Audit-v0``: one Financial Audit episode environment in process."""

    _max_candidates = native.AUDIT_MAX_CANDIDATES
    _features = native.AUDIT_FEATURES

    def __init__(self, observation_mode: str = "text", action_mode: str = "index", task_id: str = "expense_audit",
                 investigation_mode: bool = False, max_findings_per_step: int = 50, fraud_difficulty: str = "auto",
                 render_mode: Optional[str] = None) -> None:
        self.env = native.AuditEnv(max_findings_per_step, fraud_difficulty)
        self.defaults = {"task_id": task_id, "investigation_mode": investigation_mode}
        self._final = False
        super().__init__(observation_mode, action_mode, render_mode)

    def _reset_request(self, options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        request: Dict[str, Any] = dict(self.defaults)
        request.update(options or {})
        # A fixed episode id keeps replies reproducible (the environment draws one otherwise).
        request.setdefault("episode_id", "gym")
        return request

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        if self.action_mode == "index":
            chosen = self._candidates[int(action)] if 0 <= int(action) < len(self._candidates) else {}
        else:
            chosen = json.loads(action) if isinstance(action, str) else dict(action)
        inner = chosen.get("action") if isinstance(chosen.get("action"), dict) else chosen
        self._final = bool(chosen.get("submit_final") or inner.get("submit_final"))
        return super().step(action)

    def _render_text(self, envelope: Dict[str, Any], first: bool) -> str:
        self._last_reward = envelope["reward"]
        done = bool(envelope["done"])
        self._terminated = done and self._final
        self._truncated = done and not self._final
        return audit_text(envelope, first)


ENV_IDS = {
    "LedgerShield/ControlBench-v0": ("ledgershield.gym_envs:ControlBenchGymEnv", "ledgershield.vector:ControlBenchVectorEnv"),
    "LedgerShield/Audit-v0": ("ledgershield.gym_envs:AuditGymEnv", "ledgershield.vector:AuditVectorEnv"),
}


def register_envs() -> None:
    """Register the Gymnasium ids (idempotent; ``import ledgershield`` calls it)."""
    for env_id, (entry, vector_entry) in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry, vector_entry_point=vector_entry,
                               disable_env_checker=False)
