"""Gymnasium environments over the in-process environments (``import ledgershield`` registers
them)::

    import gymnasium as gym
    import ledgershield  # noqa: F401  (registers the ids)

    env = gym.make("LedgerShield/ControlBench-v0")          # observation_mode="dict"
    obs, info = env.reset(seed=7)
    obs, reward, terminated, truncated, info = env.step(0)     # info["candidates"][0]

Resets (ControlBench): by default ``reset(seed=s)`` draws a case from the **task
distribution** (``ls_gen::tasks``: every family A-E and every generator, curated, challenge,
holdout, twins, AP-quarter slots and FraudGen, in the proportions of docs/python.md), a pure
function of the seed: each episode starts in a new session, whatever ran before.
``template_split`` and ``generator_split`` (``train``, ``validation``, ``test`` or ``all``)
select the documented splits by base template and by generator. ``case_id`` plays that case;
``curriculum=True`` uses the server's seeded reset instead (the case pool, the curriculum's tiers,
the institution carried across episodes as in one HTTP session). Any of these may also be given
per reset in ``options``.

Observations: ``observation_mode="dict"`` (default) is a ``Dict`` space of fixed-size arrays:
``features`` (float32; documented in docs/python.md), ``action_mask`` (int8, 1 for each legal
candidate) and, for ControlBench, ``rl_vector`` (the 37-entry RL export vector of instrumented
mode; zeros in the default blind mode, which exposes no belief state); ``"text"`` is the compact
reply as text (what ``LedgerShieldToolEnv`` shows a model; stock array learners such as SB3
cannot take a text space, hence the array default).

Actions: ``action_mode="index"`` (default) is ``Discrete``: an index into the legal candidate
actions of the current observation, listed in ``info["candidates"]`` (an index past the list is
played as an unknown action, a penalised step), with ``action_masks()`` for masked policies;
``"json"`` takes the typed action itself, as a mapping or JSON text (``{"action_type",
"payload"}``; for the audit env ``{"findings", "submit_final"}``); its space samples well-formed
actions.

``info`` has the same keys and types at every step (``candidates``, ``action_mask``,
``info_json``: the envelope's ``info`` as JSON text), plus on the step that ends an episode
``final_score`` (0 for an episode truncated before any grade) and, for a task draw, ``task`` (generator, base template, family, seed, splits;
never shown before the end, as ``/state`` shows a case's split only then); the audit env's
terminal ``info`` carries ``grade`` (the grader's reply) and ``final_score``. ``render()``:
``render_mode="ansi"`` returns the compact text, ``"rgb_array"`` an image of it (Pillow).
"""

from __future__ import annotations

import abc
import json
import string
import textwrap
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import gymnasium
import numpy as np
from gymnasium import spaces

from . import native
from .trl_env import _compact, _shrink, compact_result

TEXT_MAX_LENGTH = 1 << 20
SPLITS = ("train", "validation", "test", "all")


class AnyText(spaces.Text):
    """A ``Text`` space holding any string up to ``max_length`` characters (replies carry
    Unicode from the documents; Gymnasium's ``Text`` checks a fixed character set)."""

    def __init__(self, max_length: int = TEXT_MAX_LENGTH) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=string.printable)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyText) and other.max_length == self.max_length


class JsonAction(spaces.Space):
    """The typed-action space of ``action_mode="json"``: a step body as a mapping or JSON text.
    ``sample()`` draws one of a fixed list of well-formed actions any case accepts (so
    ``check_env`` and random agents step the environment rather than send text it refuses);
    the environment takes any action its server would."""

    def __init__(self, examples: Sequence[Mapping[str, Any]], seed: Optional[int] = None) -> None:
        self.examples = tuple(json.dumps(e, separators=(",", ":")) for e in examples)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return self.examples[int(self.np_random.integers(len(self.examples)))]

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            try:
                return isinstance(json.loads(x), dict)
            except ValueError:
                return False
        return isinstance(x, Mapping) or hasattr(x, "model_dump")

    def __repr__(self) -> str:
        return f"JsonAction({len(self.examples)} examples)"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, JsonAction) and other.examples == self.examples


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


def text_image(text: str, width: int = 960, height: int = 720) -> np.ndarray:
    """``text`` drawn black on white (Pillow's default font, wrapped to the width, cut at the
    bottom) as an ``(height, width, 3)`` uint8 array: the ``rgb_array`` render of a reply."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    left, top, right, bottom = draw.textbbox((0, 0), "M", font=font)
    cols = max(8, (width - 16) // max(1, right - left))
    line_h = max(1, bottom - top) + 4
    y = 8
    for paragraph in text.splitlines() or [""]:
        for line in textwrap.wrap(paragraph, cols) or [""]:
            if y + line_h > height - 8:
                return np.asarray(image, dtype=np.uint8).copy()
            draw.text((8, y), line, fill="black", font=font)
            y += line_h
    return np.asarray(image, dtype=np.uint8).copy()


def check_reset_options(template_split: str, generator_split: str, curriculum: bool,
                        fresh_institution: Optional[bool] = None) -> None:
    """Refuse ControlBench reset options that cannot go together (``ValueError``)."""
    for name, value in (("template_split", template_split), ("generator_split", generator_split)):
        if value not in SPLITS:
            raise ValueError(f"{name} must be one of {', '.join(SPLITS)}, not {value!r}")
    if curriculum and (template_split, generator_split) != ("all", "all"):
        raise ValueError("curriculum=True draws from the server's case pool: it takes no template_split / generator_split")
    if curriculum and fresh_institution:
        raise ValueError("curriculum=True carries the curriculum across episodes; fresh_institution=True would reset it every episode")


def controlbench_reset(defaults: Mapping[str, Any], options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The reset body of a ControlBench reset with these defaults and per-reset options: a
    ``case_id`` (or ``custom_case``) reset from a fresh institution unless
    ``fresh_institution=False``; with ``curriculum``, the server's seeded reset in the session;
    else a task draw with the two splits."""
    o = {k: v for k, v in defaults.items() if v is not None}
    o.update(options or {})
    curriculum = bool(o.pop("curriculum", False))
    fresh = o.pop("fresh_institution", None)
    splits = {k: o.pop(k) for k in ("template_split", "generator_split") if k in o}
    check_reset_options(splits.get("template_split", "all"), splits.get("generator_split", "all"),
                        curriculum and not (o.get("case_id") or o.get("custom_case")))
    if o.get("case_id") or o.get("custom_case"):
        o["fresh_institution"] = True if fresh is None else bool(fresh)
    elif curriculum:
        o["fresh_institution"] = bool(fresh)
    else:
        o["template_split"] = splits.get("template_split", "all")
        o["generator_split"] = splits.get("generator_split", "all")
    return o


class _NativeGymEnv(gymnasium.Env, abc.ABC):
    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 1}
    _max_candidates: int
    _features: int
    _json_examples: Sequence[Mapping[str, Any]]

    def __init__(self, observation_mode: str, action_mode: str, render_mode: Optional[str]) -> None:
        if observation_mode not in ("text", "dict"):
            raise ValueError(f"observation_mode must be 'text' or 'dict', not {observation_mode!r}")
        if action_mode not in ("index", "json"):
            raise ValueError(f"action_mode must be 'index' or 'json', not {action_mode!r}")
        if render_mode not in (None, "ansi", "rgb_array"):
            raise ValueError(f"render_mode must be None, 'ansi' or 'rgb_array', not {render_mode!r}")
        self.observation_mode = observation_mode
        self.action_mode = action_mode
        self.render_mode = render_mode
        self.action_space = spaces.Discrete(self._max_candidates) if action_mode == "index" else JsonAction(self._json_examples)
        self.observation_space = AnyText() if observation_mode == "text" else self._dict_space()
        self._text = ""
        self._candidates: List[Dict[str, Any]] = []
        self._mask = np.zeros(self._max_candidates, dtype=np.int8)

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
        self._mask = arrays["action_mask"]
        info: Dict[str, Any] = {"candidates": self._candidates, "action_mask": arrays["action_mask"].copy(),
                                "info_json": json.dumps(envelope.get("info", {}), ensure_ascii=False)}
        if envelope.get("done"):
            info.update(self._terminal_info(envelope))
        if self.observation_mode == "text":
            return self._text, info
        return {k: v for k, v in arrays.items() if k in self.observation_space.spaces}, info

    def _terminal_info(self, envelope: Dict[str, Any]) -> Dict[str, Any]:
        """What the step that ends an episode adds to ``info``: the score (0 for an episode
        truncated before any grade, as the return counts it)."""
        score = envelope.get("info", {}).get("final_score")
        return {"final_score": 0.0 if score is None else float(score)}

    def action_masks(self) -> np.ndarray:
        """The legal actions of the current observation as booleans (sb3-contrib's
        ``MaskablePPO`` reads this; ``info["action_mask"]`` and the dict observation carry the
        same mask). After the end, every index is allowed (there is nothing left to mask)."""
        mask = self._mask.astype(bool)
        return mask if mask.any() else np.ones_like(mask)

    @abc.abstractmethod
    def _render_text(self, envelope: Dict[str, Any], first: bool) -> str:
        """The compact text of a reply; records the step's reward and end flags."""

    @abc.abstractmethod
    def _reset_text(self, options: Optional[Dict[str, Any]]) -> str:
        """Reset the environment for these options (the seed drawn from ``np_random``); the
        reply's JSON text."""

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Tuple[Any, Dict[str, Any]]:
        super().reset(seed=seed)
        return self._observe(self._reset_text(options), first=True)

    def _draw_seed(self) -> int:
        return int(self.np_random.integers(0, 2**31 - 1))

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        if self.action_mode == "index":
            text = self.env.step_index_text(int(action))
        else:
            text = self.env.step_text(action)
        obs, info = self._observe(text, first=False)
        return obs, float(self._last_reward), bool(self._terminated), bool(self._truncated), info

    def render(self) -> Any:
        if self.render_mode == "ansi":
            return self._text
        if self.render_mode == "rgb_array":
            return text_image(self._text)
        return None


class ControlBenchGymEnv(_NativeGymEnv):
    """``LedgerShield/ControlBench-v0``: one ControlBench environment in process."""

    _max_candidates = native.CONTROLBENCH_MAX_CANDIDATES
    _features = native.CONTROLBENCH_FEATURES
    _json_examples = (
        {"action_type": "lookup_policy", "payload": {}},
        *({"action_type": "submit_decision", "payload": {"decision": d, "confidence": 0.5, "reason_codes": []}}
          for d in ("PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD")),
    )

    def __init__(self, observation_mode: str = "dict", action_mode: str = "index", track_mode: str = "blind",
                 case_id: Optional[str] = None, track: Optional[str] = None, template_split: str = "all",
                 generator_split: str = "all", curriculum: bool = False, fresh_institution: Optional[bool] = None,
                 render_mode: Optional[str] = None) -> None:
        check_reset_options(template_split, generator_split, curriculum, fresh_institution)
        self.env = native.ControlBenchEnv(track_mode)
        self.defaults = {"case_id": case_id, "track": track, "template_split": template_split,
                         "generator_split": generator_split, "curriculum": curriculum,
                         "fresh_institution": fresh_institution}
        super().__init__(observation_mode, action_mode, render_mode)

    def _dict_space(self) -> spaces.Dict:
        d = super()._dict_space()
        d.spaces["rl_vector"] = spaces.Box(-np.inf, np.inf, (native.RL_VECTOR_LEN,), np.float32)
        return d

    def _reset_text(self, options: Optional[Dict[str, Any]]) -> str:
        request = controlbench_reset(self.defaults, options)
        seed = request.pop("seed", None)
        return self.env.reset_text(seed=self._draw_seed() if seed is None else int(seed), **request)

    def _terminal_info(self, envelope: Dict[str, Any]) -> Dict[str, Any]:
        info = super()._terminal_info(envelope)
        task = self.env.task()
        if task is not None:
            info["task"] = task
        return info

    def _render_text(self, envelope: Dict[str, Any], first: bool) -> str:
        self._last_reward = envelope["reward"]
        self._terminated, self._truncated = envelope["terminated"], envelope["truncated"]
        return controlbench_text(envelope, first)


class AuditGymEnv(_NativeGymEnv):
    """``LedgerShield/Audit-v0``: one Financial Audit episode environment in process."""

    _max_candidates = native.AUDIT_MAX_CANDIDATES
    _features = native.AUDIT_FEATURES
    _json_examples = ({"findings": [], "submit_final": False}, {"findings": [], "submit_final": True})

    def __init__(self, observation_mode: str = "dict", action_mode: str = "index", task_id: str = "expense_audit",
                 investigation_mode: bool = False, max_findings_per_step: int = 50, fraud_difficulty: str = "auto",
                 render_mode: Optional[str] = None) -> None:
        self.env = native.AuditEnv(max_findings_per_step, fraud_difficulty)
        self.defaults = {"task_id": task_id, "investigation_mode": investigation_mode}
        self._final = False
        super().__init__(observation_mode, action_mode, render_mode)

    def _reset_text(self, options: Optional[Dict[str, Any]]) -> str:
        request: Dict[str, Any] = dict(self.defaults)
        request.update(options or {})
        request.setdefault("seed", self._draw_seed())
        # A fixed episode id keeps replies reproducible (the environment draws one otherwise).
        request.setdefault("episode_id", "gym")
        return self.env.reset_text(**request)

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
        if self.action_mode == "index":
            chosen = self._candidates[int(action)] if 0 <= int(action) < len(self._candidates) else {}
        else:
            chosen = json.loads(action) if isinstance(action, str) else dict(action)
        inner = chosen.get("action") if isinstance(chosen.get("action"), dict) else chosen
        self._final = bool(chosen.get("submit_final") or inner.get("submit_final"))
        return super().step(action)

    def _terminal_info(self, envelope: Dict[str, Any]) -> Dict[str, Any]:
        grade = envelope.get("grader")
        if not isinstance(grade, dict):
            return {}
        return {"grade": grade, "final_score": float(grade.get("score", 0.0))}

    def _render_text(self, envelope: Dict[str, Any], first: bool) -> str:
        self._last_reward = envelope["reward"]
        done = bool(envelope["done"])
        self._terminated = done and self._final
        self._truncated = done and not self._final
        return audit_text(envelope, first)


def controlbench_env(observation_mode: str = "dict", action_mode: Optional[str] = None, **kwargs: Any) -> gymnasium.Env:
    """``LedgerShield/ControlBench-v0``: ``observation_mode="structured"`` (with
    ``action_mode="factored"``, its only action mode) is ``ledgershield.structured``'s
    environment; the other modes are :class:`ControlBenchGymEnv`."""
    if observation_mode == "structured" or action_mode == "factored":
        if (observation_mode, action_mode or "factored") != ("structured", "factored"):
            raise ValueError("the factored action space goes with observation_mode='structured' (and only with it)")
        from .structured import StructuredControlBenchEnv
        return StructuredControlBenchEnv(**kwargs)
    return ControlBenchGymEnv(observation_mode=observation_mode, action_mode=action_mode or "index", **kwargs)


def controlbench_vector(num_envs: int = 1, observation_mode: str = "dict", action_mode: Optional[str] = None,
                        **kwargs: Any) -> Any:
    """The vector entry point of ``LedgerShield/ControlBench-v0`` (the same modes)."""
    if observation_mode == "structured" or action_mode == "factored":
        if (observation_mode, action_mode or "factored") != ("structured", "factored"):
            raise ValueError("the factored action space goes with observation_mode='structured' (and only with it)")
        from .structured import StructuredControlBenchVectorEnv
        return StructuredControlBenchVectorEnv(num_envs=num_envs, **kwargs)
    from .vector import ControlBenchVectorEnv
    return ControlBenchVectorEnv(num_envs=num_envs, action_mode=action_mode or "index", **kwargs)


ENV_IDS = {
    "LedgerShield/ControlBench-v0": ("ledgershield.gym_envs:controlbench_env", "ledgershield.gym_envs:controlbench_vector"),
    "LedgerShield/Audit-v0": ("ledgershield.gym_envs:AuditGymEnv", "ledgershield.vector:AuditVectorEnv"),
}


def register_envs() -> None:
    """Register the Gymnasium ids (idempotent; ``import ledgershield`` calls it)."""
    for env_id, (entry, vector_entry) in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry, vector_entry_point=vector_entry,
                               disable_env_checker=False)
