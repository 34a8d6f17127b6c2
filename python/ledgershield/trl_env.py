"""A TRL-ready tool environment: pass the class to ``GRPOTrainer(environment_factory=...)``.

TRL creates one instance per generation, calls ``reset(**dataset_columns)`` and exposes every
public method other than ``reset`` and ``get_reward`` as a function-calling tool (its docstring's
``Args:`` section becomes the tool schema). The investigation tools and interventions are
generated at import time from ``action_schemas.json``, the payload schemas of the one Rust action
declaration (``ls_env::action``): a Rust test fails when the file is stale, a Python test when the
methods and the file disagree. ``submit_decision`` is generated the same way from the
submission's declared schema, showing the curated subset :data:`SUBMISSION_TOOL_FIELDS` (an import
error when the declaration lacks one of them) and validating the payload with
:func:`submit_decision_payload`. TRL pools instances and resets them between rollouts,
so by default every reset starts from a **fresh institution** (no memory of earlier rollouts on
the instance: the same trajectory gets the same reward whatever ran before); set
``carry_memory = True`` on a subclass to keep the institution's memory across resets.

``get_reward()`` (TRL calls it when defined) is the episode's terminal grade; when the model never
submitted, it first submits the safe ``NEEDS_REVIEW`` fallback (as ``ledgershield run --agent llm``
does) so that every rollout is graded (``grade_unsubmitted = False`` returns 0.0 instead).
``env.reward`` is the grade once the episode ended, else 0.0.

Replies are ``compact`` by default (``reply_mode = "full"`` for the raw tool results): status
fields first, the tool result without its control-boundary and reward-model echoes, OCR tokens as
``"token_id text [x0,y0,x1,y1]"`` strings, long texts and lists cut. ``reply_mode = "ledger"`` is
the self-sufficient form: the compact status and result (OCR tokens left out) followed by the
episode's whole evidence ledger (the Rust ledger, ``ls_rl::Ledger``, through
:mod:`ledgershield.training.ledger`: one line per thing revealed so far, with its relations and
how a submission cites it), so the latest reply alone is enough to write a submission.

By default the environment runs **in process** (``ledgershield.native``: no server, the same
replies byte for byte). A server URL (``environment_factory(url)`` or ``LEDGERSHIELD_URL``) plays
against a remote server over the WebSocket instead; use :func:`environment_factory` to bind a URL
and settings, since TRL calls the class with no arguments. ``close()`` is idempotent; a ``with``
block or interpreter exit closes the session.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from typing import Any, Dict, List, Optional

from .client import LedgerShieldEnv, LedgerShieldServerError
from .models import ControlBenchAction, ControlBenchObservation
from .submission import submit_decision_payload

#: The URL ``ledgershield serve`` listens on by default (for ``environment_factory(DEFAULT_URL)``).
DEFAULT_URL = "http://127.0.0.1:8000"
RESET_KEYS = ("case_id", "seed", "track", "custom_case")


def _compact(value: Any, limit: int = 4000) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 15] + "...(truncated)"


# Echoed on every tool result, constant or irrelevant to the decision: dropped in compact mode.
_NOISE = {"tool_name", "control_boundary", "reward_model", "cost", "novel_signal_count", "scope"}


def _shrink(value: Any, depth: int = 0, text_limit: int = 200, list_limit: int = 24) -> Any:
    """Bounded copy of a tool result: strings and lists cut, floats rounded, nesting limited."""
    if isinstance(value, str):
        return value if len(value) <= text_limit else value[: text_limit - 3] + "..."
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, list):
        out = [_shrink(v, depth + 1, text_limit, list_limit) for v in value[:list_limit]]
        if len(value) > list_limit:
            out.append(f"+{len(value) - list_limit} more")
        return out
    if isinstance(value, dict):
        if depth >= 4:
            return _compact(value, 120)
        return {k: _shrink(v, depth + 1, text_limit, list_limit) for k, v in value.items()
                if v not in (None, [], {}, "") and not (depth == 0 and k in _NOISE)}
    return value


def _token_line(t: Dict[str, Any]) -> str:
    box = ",".join(str(int(round(float(x)))) for x in (t.get("bbox") or []))
    page = f" p{t['page']}" if t.get("page") not in (None, 1) else ""
    return f"{t.get('token_id')} {t.get('text', '')}{page} [{box}]"


def compact_result(result: Dict[str, Any]) -> Dict[str, Any]:
    """The compact form of one tool result (see the module documentation)."""
    r = dict(result)
    if r.get("success") is True:
        r.pop("success")
    if str(r.get("message", "")).endswith("completed."):
        r.pop("message")
    if isinstance(r.get("tokens"), list):
        r["tokens"] = [_token_line(t) if isinstance(t, dict) else t for t in r["tokens"]]
        return _shrink(r, list_limit=60)
    return _shrink(r)


class LedgerShieldToolEnv:
    """LedgerShield ControlBench as a set of tools, one per action."""

    base_url: Optional[str] = None
    #: ``compact`` (default), ``ledger`` (compact plus the evidence ledger) or ``full`` tool replies.
    reply_mode: str = "compact"
    #: Keep the institution's memory across resets (default: a fresh institution per reset).
    carry_memory: bool = False
    #: ``get_reward()`` submits the safe fallback when the model never submitted.
    grade_unsubmitted: bool = True
    #: Set once the server is known not to take ``fresh_institution`` (then a reset reconnects).
    _server_lacks_fresh_flag: bool = False

    def __init__(self) -> None:
        self._url: Optional[str] = type(self).base_url or os.environ.get("LEDGERSHIELD_URL") or None
        self._client: Any = self._new_client()
        self.reward: float = 0.0
        self.done: bool = False
        self.final_score: Optional[float] = None
        self.observation: Optional[ControlBenchObservation] = None
        self.case_id: Optional[str] = None
        self.result_class: Optional[str] = None
        self.submitted_by_model: bool = False
        self.ledger: Any = None

    def __enter__(self) -> "LedgerShieldToolEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close()

    def __del__(self) -> None:
        if sys.is_finalizing():
            return  # the process is exiting: the server sees the connection drop
        try:
            self._close()
        except Exception:
            pass

    def _close(self) -> None:
        # Idempotent: openenv's sync client restarts its event loop on a second close().
        client, self._client = getattr(self, "_client", None), None
        if client is not None:
            client.close()

    def _new_client(self) -> Any:
        if self._url is None:
            from .native import NativeClient

            return NativeClient()
        return LedgerShieldEnv(base_url=self._url).sync()

    def _connected(self) -> Any:
        if self._client is None:
            self._client = self._new_client()
        return self._client

    def reset(self, **kwargs: Any) -> str:
        """Start an episode. Dataset columns ``case_id``, ``seed``, ``track`` and ``custom_case``
        select the case; other columns (``prompt``, ...) are ignored."""
        params = {k: kwargs[k] for k in RESET_KEYS if kwargs.get(k) is not None}
        result = self._reset(params)
        self.reward = 0.0
        self.done = False
        self.final_score = None
        self.result_class = None
        self.submitted_by_model = False
        self.observation = result.observation
        self.case_id = result.observation.case_id
        from .training.ledger import EvidenceLedger

        self.ledger = EvidenceLedger()
        self.ledger.observe(result.observation.model_dump())
        return self._describe_case(result.observation)

    def _reset(self, params: Dict[str, Any]) -> Any:
        if self.carry_memory:
            return self._connected().reset(**params)
        if not type(self)._server_lacks_fresh_flag:
            try:
                return self._connected().reset(fresh_institution=True, **params)
            except LedgerShieldServerError as e:
                if "fresh_institution" not in e.message:
                    raise
                type(self)._server_lacks_fresh_flag = True
        # A server without the flag: a new session is a fresh institution.
        self._close()
        return self._connected().reset(**params)

    def get_reward(self) -> float:
        """The episode's terminal grade (TRL's reward hook). An episode the model never ended is
        first ended with the safe ``NEEDS_REVIEW`` fallback (``grade_unsubmitted``)."""
        if not self.done and self.grade_unsubmitted and self.observation is not None:
            fallback = {"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": ["model_output_unparseable"],
                        "policy_checks": {}, "evidence_map": {}, "notes": "rollout ended before a decision"}
            try:
                self._act("submit_decision", fallback, by_model=False)
            except ValueError:
                pass
        return float(self.reward)


    @staticmethod
    def _describe_case(obs: ControlBenchObservation) -> str:
        docs = ", ".join(f"{d.doc_id} ({d.doc_type}, {d.page_count} page(s))" for d in obs.visible_documents)
        return (
            f"Case {obs.case_id} ({obs.task_type}).\n{obs.instruction}\n"
            f"Documents: {docs or 'none'}.\n"
            f"Budget {obs.budget_remaining:g}/{obs.budget_total:g}, at most {obs.max_steps} steps. "
            "End the episode with submit_decision."
        )

    def _act(self, action_type: str, payload: Dict[str, Any], by_model: bool = True) -> str:
        if self.done:
            raise ValueError("The episode is over; no more actions are accepted.")
        try:
            result = self._connected().step(ControlBenchAction(action_type=action_type, payload=payload))  # type: ignore[arg-type]
        except LedgerShieldServerError as e:
            raise ValueError(e.message) from e
        obs = result.observation
        self.observation = obs
        self.done = bool(result.done)
        if self.ledger is not None:
            self.ledger.observe(obs.model_dump())
        if self.done:
            self.final_score = obs.final_score
            self.reward = float(self.final_score or 0.0)
            self.result_class = obs.info.get("result_class")
            self.submitted_by_model = by_model and action_type == "submit_decision"
        if self.reply_mode in ("compact", "ledger"):
            return self._compact_reply(obs)
        reply: Dict[str, Any] = {}
        if self.done:
            # Status first, so a long grading report never truncates it away.
            reply["episode_over"] = True
            reply["final_score"] = self.final_score
            reply["terminal_reason"] = obs.info.get("terminal_reason", "submitted" if obs.terminated else None)
        reply["messages"] = obs.messages
        reply["budget_remaining"] = obs.budget_remaining
        reply["steps_left"] = max(obs.max_steps - obs.step_count, 0)
        if obs.pending_events:
            reply["pending_events"] = [e.model_dump() for e in obs.pending_events]
        reply["result"] = obs.last_tool_result
        return _compact(reply)

    def _compact_reply(self, obs: ControlBenchObservation) -> str:
        reply: Dict[str, Any] = {}
        if self.done:
            reply.update(episode_over=True, final_score=self.final_score, result_class=self.result_class,
                         terminal_reason=obs.info.get("terminal_reason", "submitted" if obs.terminated else None))
            return _compact(reply)
        reply["budget_remaining"] = round(obs.budget_remaining, 2)
        reply["steps_left"] = max(obs.max_steps - obs.step_count, 0)
        if obs.pending_events:
            reply["pending_events"] = len(obs.pending_events)
        if obs.messages:
            reply["messages"] = [_shrink(m) for m in obs.messages[-3:]]
        result = obs.last_tool_result if isinstance(obs.last_tool_result, dict) else {"value": obs.last_tool_result}
        if self.reply_mode == "ledger":
            result = {k: v for k, v in result.items() if k not in ("tokens", "focus_tokens", "text_preview", "focus_text")}
        reply["result"] = compact_result(result)
        text = _compact(reply, 6000)
        if self.reply_mode == "ledger" and self.ledger is not None:
            text += "\nEvidence so far:\n" + self.ledger.render()
        return text


_SCHEMAS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "action_schemas.json")
_PY_TYPES: Dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": Dict[str, Any]}


def load_action_schemas() -> List[Dict[str, Any]]:
    """Every action of the declaration: ``name``, ``kind``, ``description`` and its payload JSON
    Schema, from ``action_schemas.json`` (generated from the Rust declaration; a Rust test fails
    when it is stale)."""
    with open(_SCHEMAS_FILE, encoding="utf-8") as f:
        return list(json.load(f)["actions"])


#: The submission's fields the ``submit_decision`` tool shows, in order (a curated subset of the
#: declared payload: the ones a model fills), and those it requires (the declaration's required
#: fields plus ``confidence``, which the tool always asks for).
SUBMISSION_TOOL_FIELDS = ("decision", "confidence", "reason_codes", "fraud_flags", "discrepancies",
                          "policy_checks", "evidence_map", "notes")
SUBMISSION_TOOL_REQUIRED = ("decision", "confidence")


def _annotation(schema: Dict[str, Any]) -> Any:
    if schema.get("type") == "array":
        return List[_PY_TYPES.get((schema.get("items") or {}).get("type"), Any)]  # type: ignore[misc]
    if schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
        return Dict[str, _PY_TYPES.get(schema["additionalProperties"].get("type"), Any)]  # type: ignore[misc]
    return _PY_TYPES.get(schema.get("type"), Any)


def _submit(self: "LedgerShieldToolEnv", payload: Dict[str, Any]) -> str:
    """The submission, validated by :func:`submit_decision_payload` (an invalid one is a tool
    error for the model), then sent."""
    try:
        payload = submit_decision_payload(**payload)
    except Exception as e:  # pydantic.ValidationError: report it to the model as a tool error
        raise ValueError(f"invalid submission: {e}") from e
    return self._act("submit_decision", payload)


def _tool_method(action: Dict[str, Any]) -> Any:
    """A tool method for one declared action: its parameters are the payload schema's properties
    (required ones first, without a default; the others default to ``None`` and are left out of
    the payload when unset), its docstring the description and an ``Args:`` section (what TRL
    turns into the tool schema)."""
    name, schema = action["name"], action["schema"]
    props: Dict[str, Any] = schema.get("properties") or {}
    final = action["kind"] == "final"
    if final:
        missing = [p for p in SUBMISSION_TOOL_FIELDS if p not in props]
        if missing or not set(schema.get("required") or []) <= set(SUBMISSION_TOOL_REQUIRED):
            raise RuntimeError(f"action_schemas.json: the submission tool's fields disagree with the declaration ({missing})")
        props = {p: props[p] for p in SUBMISSION_TOOL_FIELDS}
        required = list(SUBMISSION_TOOL_REQUIRED)
    else:
        required = [p for p in schema.get("required") or [] if p in props]
    order = required + [p for p in props if p not in required]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("self", kind)]
    annotations: Dict[str, Any] = {}
    for p in order:
        ann = _annotation(props[p])
        if p in required:
            params.append(inspect.Parameter(p, kind, annotation=ann))
        else:
            ann = Optional[ann]
            params.append(inspect.Parameter(p, kind, default=None, annotation=ann))
        annotations[p] = ann
    annotations["return"] = str
    signature = inspect.Signature(params, return_annotation=str)

    def method(self: "LedgerShieldToolEnv", *args: Any, **kwargs: Any) -> str:
        bound = signature.bind(self, *args, **kwargs)
        payload = {k: v for k, v in bound.arguments.items() if k != "self" and v is not None}
        return _submit(self, payload) if final else self._act(name, payload)

    doc = action["description"]
    if order:
        doc += "\n\nArgs:\n" + "".join(f"    {p}: {props[p].get('description') or p}\n" for p in order)
    doc += "\nReturns:\n    " + ("The grading result, including final_score, as JSON." if final else "The tool result as JSON.")
    method.__name__ = name
    method.__qualname__ = f"LedgerShieldToolEnv.{name}"
    method.__doc__ = doc
    method.__annotations__ = annotations
    method.__signature__ = signature  # type: ignore[attr-defined]
    return method


for _action in load_action_schemas():
    setattr(LedgerShieldToolEnv, _action["name"], _tool_method(_action))


def environment_factory(base_url: Optional[str] = None, reply_mode: str = "compact", carry_memory: bool = False,
                        grade_unsubmitted: bool = True) -> type:
    """A :class:`LedgerShieldToolEnv` subclass bound to these settings (TRL instantiates it with
    no arguments): in process when ``base_url`` is ``None`` (the default), else against the
    server at ``base_url``."""
    if reply_mode not in ("compact", "full", "ledger"):
        raise ValueError(f"reply_mode must be 'compact', 'full' or 'ledger', not {reply_mode!r}")
    return type("LedgerShieldToolEnv", (LedgerShieldToolEnv,), {"base_url": base_url, "reply_mode": reply_mode,
                                                                "carry_memory": carry_memory, "grade_unsubmitted": grade_unsubmitted})
