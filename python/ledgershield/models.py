"""Typed action, observation and state models of LedgerShield ControlBench.

They subclass openenv-core's pydantic ``Action``, ``Observation`` and ``State``. Observation and
state accept fields this version does not declare, so a newer server does not break old clients.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Literal, Optional, get_args

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field

ActionType = Literal[
    "zoom",
    "get_doc_crop",
    "ocr",
    "lookup_vendor",
    "lookup_vendor_history",
    "lookup_policy",
    "lookup_po",
    "lookup_receipt",
    "search_ledger",
    "inspect_email_thread",
    "compare_bank_account",
    "request_callback_verification",
    "freeze_vendor_profile",
    "request_bank_change_approval_chain",
    "request_po_reconciliation",
    "request_additional_receipt_evidence",
    "route_to_procurement",
    "route_to_security",
    "flag_duplicate_cluster_review",
    "create_human_handoff",
    "submit_decision",
]
"""The actions, in catalogue order (investigation tools, interventions, the final action).

Written out so type checkers see the names; the one declaration is Rust's action table, exported
to ``action_schemas.json`` (``LS_WRITE_ACTION_SCHEMAS=1 cargo test -p ls-agents --test
action_schemas``). Importing this module fails when the two disagree, naming the block to paste
(``python -c "import ledgershield.models as m; print(m.action_type_source())"`` prints it too)."""


def _declared_actions() -> List[tuple[str, str]]:
    """``(name, kind)`` of every action in ``action_schemas.json``, in catalogue order."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "action_schemas.json")
    with open(path, encoding="utf-8") as f:
        return [(a["name"], a["kind"]) for a in json.load(f)["actions"]]


_DECLARED = _declared_actions()


def action_type_source() -> str:
    """The ``ActionType`` block as the declaration has it."""
    names = "".join(f'    "{name}",\n' for name, _ in _DECLARED)
    return f"ActionType = Literal[\n{names}]\n"


ACTION_TYPES: tuple[str, ...] = get_args(ActionType)
if ACTION_TYPES != tuple(name for name, _ in _DECLARED):
    raise ImportError(
        "ledgershield.models.ActionType disagrees with action_schemas.json; replace it with:\n"
        + action_type_source()
    )
INVESTIGATION_TOOLS: tuple[str, ...] = tuple(n for n, k in _DECLARED if k == "investigation")
INTERVENTIONS: tuple[str, ...] = tuple(n for n, k in _DECLARED if k == "intervention")

Decision = Literal["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD"]
DECISIONS: tuple[str, ...] = get_args(Decision)


class ControlBenchAction(Action):
    """One action: ``action_type`` plus its ``payload`` (``{}`` when the action takes none)."""

    action_type: ActionType = Field(description="The action to take")
    payload: Dict[str, Any] = Field(default_factory=dict, description="Action arguments")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class DocumentEntry(_Open):
    doc_id: str
    doc_type: str = ""
    thumbnail: str = ""
    page_count: int = 1
    language: str = ""
    available_views: List[str] = Field(default_factory=list)


class PendingEvent(_Open):
    event_id: str
    artifact_id: str = ""
    source_action: str = ""
    ready_at_clock: int = 0
    status: str = ""


class RiskSnapshot(_Open):
    observed_risk_bucket: str = ""
    observed_signals: List[str] = Field(default_factory=list)
    observed_signal_count: int = 0
    pending_event_count: int = 0
    revealed_artifact_count: int = 0
    days_until_due: int = 0
    pressure_events_seen: int = 0


class InvestigationStatus(_Open):
    tool_calls: int = 0
    interventions_taken: int = 0
    revealed_artifacts: int = 0
    budget_used: float = 0.0
    pending_events: int = 0


class ControlBenchObservation(Observation):
    """What the agent sees after a reset or a step, with the step's reward and end flags.

    ``done``/``reward`` come from openenv's base ``Observation``; ``terminated`` (a valid
    ``submit_decision``), ``truncated`` (step or budget limit) and ``info`` (grading details; on
    the final step ``info["final_score"]``) are LedgerShield's additions.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    case_id: str
    task_type: str
    instruction: str
    visible_documents: List[DocumentEntry] = Field(default_factory=list)
    revealed_artifacts: List[Dict[str, Any]] = Field(default_factory=list)
    pending_events: List[PendingEvent] = Field(default_factory=list)
    budget_remaining: float = 0.0
    budget_total: float = 0.0
    step_count: int = 0
    max_steps: int = 0
    case_clock: int = 0
    risk_snapshot: RiskSnapshot = Field(default_factory=RiskSnapshot)
    investigation_status: InvestigationStatus = Field(default_factory=InvestigationStatus)
    last_tool_result: Dict[str, Any] = Field(default_factory=dict)
    messages: List[str] = Field(default_factory=list)
    allowed_actions: List[str] = Field(default_factory=list)
    available_interventions: List[str] = Field(default_factory=list)
    case_metadata: Dict[str, Any] = Field(default_factory=dict)
    portfolio_context: Dict[str, Any] = Field(default_factory=dict)
    institutional_memory: Dict[str, Any] = Field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False
    info: Dict[str, Any] = Field(default_factory=dict)

    @property
    def final_score(self) -> Optional[float]:
        """The episode's grade once it has ended (``None`` before)."""
        score = self.info.get("final_score")
        return float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None


class ControlBenchState(State):
    """The public environment state (never gold labels or hidden signals)."""

    case_id: str = ""
    task_type: str = ""
    budget_total: float = 0.0
    budget_remaining: float = 0.0
    max_steps: int = 0
    case_clock: int = 0
    submitted: bool = False
    done: bool = False
    final_score: float = 0.0
    unsafe_outcome: bool = False
    visible_doc_ids: List[str] = Field(default_factory=list)
    revealed_artifact_ids: List[str] = Field(default_factory=list)
    trajectory: List[Dict[str, Any]] = Field(default_factory=list)
    terminal_reason: Optional[str] = None
    benchmark_track: str = ""
    track_mode: str = ""
