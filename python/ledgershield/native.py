"""The LedgerShield environments in process: the Rust environments as a native module.

``ControlBenchEnv`` and ``AuditEnv`` hold one environment each (one HTTP session's worth: the
institution's memory, the curriculum and the audit adversary persist across resets). ``reset`` and
``step`` return the same envelope as the HTTP server (``observation``, ``reward``, ``done``,
``terminated``, ``truncated``, ``info``); ``reset_text`` / ``step_text`` return the reply as JSON
text, byte for byte what the server writes for the same trajectory. The GIL is released while Rust
works. A refused request raises :class:`EnvError` (a ``ValueError``) with the message, code and
HTTP status the server answers (attributes ``message``, ``code``, ``status``, ``detail`` and, for
audit refusals, ``field``); a Rust panic raises ``RuntimeError`` and discards the environment
until the next reset. ``AuditCampaignEnv`` runs a Financial Audit multi-period campaign as the
audit server's campaign routes do.

    from ledgershield.native import ControlBenchEnv

    env = ControlBenchEnv()
    r = env.reset(case_id="CASE-D-001")
    r = env.step({"action_type": "ocr", "payload": {"doc_id": "INV-D-001"}})
    r = env.step_index(0)              # the first legal candidate action (env.candidates())
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np

from . import _native

EnvError = _native.EnvError
RL_VECTOR_LEN: int = _native.RL_VECTOR_LEN
CONTROLBENCH_FEATURES: int = _native.CONTROLBENCH_FEATURES
CONTROLBENCH_MAX_CANDIDATES: int = _native.CONTROLBENCH_MAX_CANDIDATES
AUDIT_FEATURES: int = _native.AUDIT_FEATURES
AUDIT_MAX_CANDIDATES: int = _native.AUDIT_MAX_CANDIDATES
INVALID_INDEX_ACTION: str = _native.INVALID_INDEX_ACTION

ActionLike = Union[str, Mapping[str, Any], Any]


def error_parts(e: BaseException) -> Dict[str, Any]:
    """``{"message", "code", "status", "detail", "field"}`` of an :class:`EnvError` (also its
    attributes of those names); ``field`` is the field an audit refusal names (the server's
    ``error.field``), ``None`` for ControlBench."""
    message, code, status, detail, field = e.args
    return {"message": message, "code": code, "status": status, "detail": detail, "field": field}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _action_text(action: ActionLike) -> str:
    """A step body as JSON text: text as given, a mapping dumped, a pydantic model dumped."""
    if isinstance(action, str):
        return action
    if hasattr(action, "model_dump"):
        action = action.model_dump()
    if not isinstance(action, Mapping):
        raise TypeError(f"an action is a mapping or JSON text, not {type(action).__name__}")
    return _dumps(dict(action))


class ControlBenchEnv:
    """One ControlBench environment in process (``track_mode`` ``blind`` or ``instrumented``)."""

    def __init__(self, track_mode: str = "blind") -> None:
        self._env = _native.ControlBench(track_mode)
        self.track_mode = track_mode

    def reset_text(self, **request: Any) -> str:
        """Reset with the ``POST /reset`` fields (``case_id``, ``seed``, ``track``,
        ``custom_case``, ``fresh_institution``, ...); the reply as JSON text.

        With ``template_split`` and/or ``generator_split`` (``"train"``, ``"validation"``,
        ``"test"`` or ``"all"``) the case is drawn from the task distribution instead (every
        family and generator, docs/python.md), a pure function of the splits and ``seed`` (without
        one, the next seed of this environment's own stream), in a new session; such a reset
        also takes ``track`` and ``reward_mode``, and :meth:`task` tells where the case came
        from once the episode is over."""
        return self._env.reset(_dumps({k: v for k, v in request.items() if v is not None}))

    def reset(self, **request: Any) -> Dict[str, Any]:
        return json.loads(self.reset_text(**request))

    def task(self) -> Optional[Dict[str, Any]]:
        """Where the last ended episode's case came from, for a task-distribution reset:
        ``{"generator", "template", "family", "seed", "template_split", "generator_split"}``
        (``template`` is ``None`` for FraudGen). ``None`` until an episode drawn from the task
        distribution has ended: the provenance is not shown mid-episode (a quarter slot's
        template follows its label plan)."""
        text = self._env.task()
        return None if text is None else json.loads(text)

    def watchdog_observation(self) -> Dict[str, Any]:
        """The watchdog's stream of the current episode, as ``GET /watchdog/observation``
        answers (docs/watchdog.md): the analyst's steps without its confidence, the visible
        risk signals, budget, interventions, pending artifacts, pressure events, verdicts."""
        return json.loads(self._env.watchdog_observation())

    def watchdog_verdict(self, verdict: str, reason: str = "") -> int:
        """Record a second agent's verdict (``veto``, ``escalate``, ``warn``, ``approve``) on
        the current episode, as ``POST /watchdog/verdict``; returns the verdict count (at most
        64 per episode)."""
        return int(self._env.watchdog_verdict(verdict, reason))

    def watchdog_joint(self) -> Optional[Dict[str, Any]]:
        """The joint analyst + watchdog score (``GET /watchdog/joint``), or ``None`` before the
        analyst's submission is graded."""
        text = self._env.watchdog_joint()
        return None if text is None else json.loads(text)

    def step_text(self, action: ActionLike) -> str:
        """Step with ``{"action_type", "payload"}`` (a mapping, JSON text or a
        ``ControlBenchAction``); the reply as JSON text."""
        return self._env.step(_action_text(action))

    def step(self, action: ActionLike) -> Dict[str, Any]:
        return json.loads(self.step_text(action))

    def step_index_text(self, index: int) -> str:
        """Step the ``index``-th legal candidate of the last reply (an index past the list is
        played as an unknown action: a penalised step)."""
        i = int(index)
        return self._env.step_index(i if i >= 0 else 1 << 62)

    def step_index(self, index: int) -> Dict[str, Any]:
        return json.loads(self.step_index_text(index))

    def candidates(self) -> List[Dict[str, Any]]:
        """The legal candidate actions of the last reply, in index order."""
        return json.loads(self._env.candidates())

    def arrays(self) -> Dict[str, np.ndarray]:
        """``features`` (float32), ``rl_vector`` (the 37-entry export vector; zeros in blind
        mode) and ``action_mask`` (int8) of the last reply."""
        f, r, m = self._env.arrays()
        return {
            "features": np.frombuffer(f, dtype=np.float32).copy(),
            "rl_vector": np.frombuffer(r, dtype=np.float32).copy(),
            "action_mask": np.frombuffer(m, dtype=np.uint8).astype(np.int8),
        }

    def state(self) -> Optional[Dict[str, Any]]:
        text = self._env.state()
        return None if text is None else json.loads(text)

    @property
    def done(self) -> bool:
        return bool(self._env.done)

    def close(self) -> None:
        pass


class AuditEnv:
    """One Financial Audit environment in process."""

    def __init__(self, max_findings_per_step: int = 50, fraud_difficulty: str = "auto") -> None:
        self._env = _native.Audit(int(max_findings_per_step), str(fraud_difficulty))

    def reset_text(self, **request: Any) -> str:
        """Reset with the ``POST /reset`` fields (``task_id``, ``seed``, ``episode_id``,
        ``investigation_mode``, ``fraud_level``; a ``session_id`` is echoed as the server
        echoes its session)."""
        return self._env.reset(_dumps({k: v for k, v in request.items() if v is not None}))

    def reset(self, **request: Any) -> Dict[str, Any]:
        return json.loads(self.reset_text(**request))

    def step_text(self, action: ActionLike) -> str:
        """Step with ``{"findings": [...], "submit_final": bool}`` (or ``{"action": {...}}``)."""
        return self._env.step(_action_text(action))

    def step(self, action: ActionLike) -> Dict[str, Any]:
        return json.loads(self.step_text(action))

    def step_index_text(self, index: int) -> str:
        """Step a candidate: 0 submits final, the others report one finding each (an index past
        the list is an empty step)."""
        i = int(index)
        return self._env.step_index(i if i >= 0 else 1 << 62)

    def step_index(self, index: int) -> Dict[str, Any]:
        return json.loads(self.step_index_text(index))

    def candidates(self) -> List[Dict[str, Any]]:
        return json.loads(self._env.candidates())

    def arrays(self) -> Dict[str, np.ndarray]:
        f, m = self._env.arrays()
        return {
            "features": np.frombuffer(f, dtype=np.float32).copy(),
            "action_mask": np.frombuffer(m, dtype=np.uint8).astype(np.int8),
        }

    def state(self) -> Dict[str, Any]:
        return json.loads(self._env.state())

    @property
    def done(self) -> bool:
        return bool(self._env.done)

    def close(self) -> None:
        pass


def _body(fields: Mapping[str, Any]) -> str:
    return _dumps({k: v for k, v in fields.items() if v is not None})


class AuditCampaignEnv:
    """One Financial Audit multi-period campaign in process, as the audit server's campaign
    routes serve it: each method takes that route's body fields and returns its reply (the
    ``*_text`` methods return the JSON text, byte for byte the server's). ``campaign_id`` may be
    left out of every body (this object's campaign is meant); ``start`` may pass one to choose
    the id, else one is drawn at random as the server does.

        c = AuditCampaignEnv()
        c.start(seed=42)                                  # POST /campaign/start
        c.task_start(role="expense_specialist")           # POST /campaign/task/start
        c.task_submit(role="expense_specialist", findings=[...], submit_final=True)
        c.advance()                                       # POST /campaign/period/advance
        c.state()                                         # GET /campaign/state/{id}
    """

    def __init__(self, max_findings_per_step: int = 50) -> None:
        self._c = _native.AuditCampaign(int(max_findings_per_step))

    @property
    def campaign_id(self) -> Optional[str]:
        return self._c.campaign_id

    @property
    def finished(self) -> bool:
        return bool(self._c.finished)

    def start_text(self, **body: Any) -> str:
        """``seed`` (default 42), ``total_periods`` (default 5, at most 12), ``campaign_id``."""
        return self._c.start(_body(body))

    def start(self, **body: Any) -> Dict[str, Any]:
        return json.loads(self.start_text(**body))

    def state_text(self) -> str:
        return self._c.state()

    def state(self) -> Dict[str, Any]:
        return json.loads(self._c.state())

    def task_start_text(self, **body: Any) -> str:
        """``role``: a specialist (``expense_specialist``, ``invoice_specialist``,
        ``gst_specialist``, ``fraud_specialist``, or the short names)."""
        return self._c.task_start(_body(body))

    def task_start(self, **body: Any) -> Dict[str, Any]:
        return json.loads(self.task_start_text(**body))

    def task_submit_text(self, **body: Any) -> str:
        """``role``, ``findings`` (and/or ``action``), ``submit_final``."""
        return self._c.task_submit(_body(body))

    def task_submit(self, **body: Any) -> Dict[str, Any]:
        return json.loads(self.task_submit_text(**body))

    def action_text(self, **body: Any) -> str:
        """``POST /campaign/action``: the submit under its alias (``status: accepted``)."""
        return self._c.action(_body(body))

    def action(self, **body: Any) -> Dict[str, Any]:
        return json.loads(self.action_text(**body))

    def advance_text(self, **body: Any) -> str:
        return self._c.advance(_body(body))

    def advance(self, **body: Any) -> Dict[str, Any]:
        return json.loads(self.advance_text(**body))

    def review_text(self, **body: Any) -> str:
        """``POST /overseer/review``: ``decisions``, ``conflicts_resolved``, ``audit_trail_id``
        (or ``action``)."""
        return self._c.review(_body(body))

    def review(self, **body: Any) -> Dict[str, Any]:
        return json.loads(self.review_text(**body))

    def report_text(self) -> str:
        """``GET /overseer/report``."""
        return self._c.report()

    def report(self) -> Dict[str, Any]:
        return json.loads(self._c.report())

    def self_improve_text(self, **body: Any) -> str:
        """``POST /self-improve``: ``train_seeds``, ``held_out_seeds``."""
        return self._c.self_improve(_body(body))

    def self_improve(self, **body: Any) -> Dict[str, Any]:
        return json.loads(self.self_improve_text(**body))

    def improve_history_text(self) -> str:
        """``GET /self-improve/history``."""
        return self._c.improve_history()

    def improve_history(self) -> Dict[str, Any]:
        return json.loads(self._c.improve_history())

    def close(self) -> None:
        pass


class NativeClient:
    """The in-process stand-in for ``LedgerShieldEnv(...).sync()`` that
    :class:`~ledgershield.trl_env.LedgerShieldToolEnv` uses by default: ``reset(**params)`` and
    ``step(action)`` return openenv ``StepResult`` objects parsed exactly as the WebSocket client
    parses a reply; a refusal raises ``LedgerShieldServerError`` with the server's message."""

    def __init__(self, track_mode: str = "blind") -> None:
        self._env = ControlBenchEnv(track_mode)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from .client import LedgerShieldEnv, LedgerShieldServerError

        try:
            payload = fn(*args, **kwargs)
        except EnvError as e:
            parts = error_parts(e)
            raise LedgerShieldServerError({"message": parts["message"], "code": "VALIDATION_ERROR",
                                           "error": parts["code"]}) from e
        return LedgerShieldEnv._parse_result(None, payload)  # type: ignore[arg-type]

    def reset(self, **params: Any) -> Any:
        return self._call(self._env.reset, **params)

    def step(self, action: ActionLike) -> Any:
        return self._call(self._env.step, action)

    def close(self) -> None:
        pass

    def __enter__(self) -> "NativeClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
