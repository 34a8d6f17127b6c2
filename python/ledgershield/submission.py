"""Helpers to build a valid ``submit_decision`` payload.

The server ignores unknown keys but rejects wrong types; these helpers validate types and the
server's size limits client-side, so a malformed submission fails before it costs a step.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .models import ControlBenchAction, Decision

MAX_LIST_ITEMS = 256
MAX_MAP_ENTRIES = 256
MAX_TEXT_CHARS = 8192


class EvidenceRef(BaseModel):
    """Where a claim is visible: a document region and optionally the OCR token ids."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str
    page: int = Field(default=1, ge=1)
    bbox: Optional[List[float]] = Field(default=None, min_length=4, max_length=4)
    token_ids: List[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)


class Submission(BaseModel):
    """A ``submit_decision`` payload."""

    model_config = ConfigDict(extra="allow")

    decision: Decision
    confidence: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    risk_score: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    reason_codes: Optional[List[str]] = Field(default=None, max_length=MAX_LIST_ITEMS)
    fraud_flags: Optional[List[str]] = Field(default=None, max_length=MAX_LIST_ITEMS)
    discrepancies: Optional[List[str]] = Field(default=None, max_length=MAX_LIST_ITEMS)
    campaign_signals: Optional[List[str]] = Field(default=None, max_length=MAX_LIST_ITEMS)
    duplicate_links: Optional[List[str]] = Field(default=None, max_length=MAX_LIST_ITEMS)
    cross_invoice_links: Optional[List[str]] = Field(default=None, max_length=MAX_LIST_ITEMS)
    predicted_probabilities: Optional[Dict[str, float]] = None
    policy_checks: Dict[str, Literal["pass", "fail"]] = Field(default_factory=dict)
    evidence_map: Dict[str, Any] = Field(default_factory=dict)
    extracted_fields: Dict[str, Any] = Field(default_factory=dict)
    line_items: List[Any] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    counterfactual: Optional[Any] = None
    decision_certificate: Optional[Any] = None
    handoff_packet: Optional[Any] = None
    recommended_next_action: Optional[str] = Field(default=None, max_length=MAX_TEXT_CHARS)
    notes: Optional[str] = Field(default=None, max_length=MAX_TEXT_CHARS)

    @field_validator("policy_checks", "evidence_map", "extracted_fields", "predicted_probabilities")
    @classmethod
    def _bounded_map(cls, v: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        if v is not None and len(v) > MAX_MAP_ENTRIES:
            raise ValueError(f"at most {MAX_MAP_ENTRIES} entries")
        return v

    @field_validator("evidence_map", mode="before")
    @classmethod
    def _evidence_refs(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: (r.model_dump(exclude_none=True) if isinstance(r, EvidenceRef) else r) for k, r in v.items()}
        return v

    def to_payload(self) -> Dict[str, Any]:
        """The JSON payload (unset optional fields omitted, so graders see them as absent)."""
        return self.model_dump(exclude_none=True, mode="json")

    def to_action(self) -> ControlBenchAction:
        return ControlBenchAction(action_type="submit_decision", payload=self.to_payload())


def submit_decision_payload(
    decision: Decision,
    *,
    confidence: Optional[float] = None,
    reason_codes: Optional[Sequence[str]] = None,
    fraud_flags: Optional[Sequence[str]] = None,
    discrepancies: Optional[Sequence[str]] = None,
    policy_checks: Optional[Dict[str, str]] = None,
    evidence_map: Optional[Dict[str, Any]] = None,
    extracted_fields: Optional[Dict[str, Any]] = None,
    notes: Optional[str] = None,
    **extra: Any,
) -> Dict[str, Any]:
    """Validate and build a ``submit_decision`` payload.

    Raises ``pydantic.ValidationError`` for an unknown decision, a confidence outside [0, 1], a
    policy check other than ``pass``/``fail`` or a field over the server's limits.
    """
    sub = Submission(
        decision=decision,
        confidence=confidence,
        reason_codes=list(reason_codes) if reason_codes is not None else None,
        fraud_flags=list(fraud_flags) if fraud_flags is not None else None,
        discrepancies=list(discrepancies) if discrepancies is not None else None,
        policy_checks=dict(policy_checks or {}),
        evidence_map=dict(evidence_map or {}),
        extracted_fields=dict(extracted_fields or {}),
        notes=notes,
        **extra,
    )
    return sub.to_payload()


def submit_decision_action(decision: Decision, **kwargs: Any) -> ControlBenchAction:
    """As :func:`submit_decision_payload`, wrapped in a :class:`ControlBenchAction`."""
    return ControlBenchAction(action_type="submit_decision", payload=submit_decision_payload(decision, **kwargs))
