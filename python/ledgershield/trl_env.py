"""A TRL-ready tool environment: pass the class to ``GRPOTrainer(environment_factory=...)``.

TRL creates one instance per generation, calls ``reset(**dataset_columns)`` and exposes every
public method other than ``reset`` and ``get_reward`` as a function-calling tool (its docstring's
``Args:`` section becomes the tool schema). TRL pools instances and resets them between rollouts,
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
episode's whole evidence ledger (:mod:`ledgershield.training.ledger`: the ids, values and OCR lines
with token ids revealed so far), so the latest reply alone is enough to write a submission.

By default the environment runs **in process** (``ledgershield.native``: no server, the same
replies byte for byte). A server URL (``environment_factory(url)`` or ``LEDGERSHIELD_URL``) plays
against a remote server over the WebSocket instead; use :func:`environment_factory` to bind a URL
and settings, since TRL calls the class with no arguments. ``close()`` is idempotent; a ``with``
block or interpreter exit closes the session.
"""

from __future__ import annotations

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

    # ------------------------------------------------------------------ investigation tools

    def zoom(self, doc_id: str, page: int = 1, bbox: Optional[List[float]] = None) -> str:
        """
        Zoom into a region of a document and read the text there.

        Args:
            doc_id: Document id from the case's document list.
            page: 1-based page number.
            bbox: Region as [x0, y0, x1, y1]; the whole page when omitted.

        Returns:
            The zoomed region's text and tokens as JSON.
        """
        return self._act("zoom", {"doc_id": doc_id, "page": page, **({"bbox": bbox} if bbox is not None else {})})

    def get_doc_crop(self, doc_id: str, page: int = 1, bbox: Optional[List[float]] = None) -> str:
        """
        Get a cropped region of a document with a text hint.

        Args:
            doc_id: Document id from the case's document list.
            page: 1-based page number.
            bbox: Region as [x0, y0, x1, y1]; the whole page when omitted.

        Returns:
            The crop's text hint as JSON.
        """
        return self._act("get_doc_crop", {"doc_id": doc_id, "page": page, **({"bbox": bbox} if bbox is not None else {})})

    def ocr(self, doc_id: str, mode: str = "fast") -> str:
        """
        Run OCR on a document.

        Args:
            doc_id: Document id from the case's document list.
            mode: "fast" (cheap, may contain errors) or "accurate" (costlier).

        Returns:
            The recognised text tokens with their ids as JSON.
        """
        return self._act("ocr", {"doc_id": doc_id, "mode": mode})

    def lookup_vendor(self, vendor_key: str) -> str:
        """
        Look up a vendor in the vendor master.

        Args:
            vendor_key: The vendor key.

        Returns:
            The vendor master record as JSON.
        """
        return self._act("lookup_vendor", {"vendor_key": vendor_key})

    def lookup_vendor_history(self, vendor_key: str) -> str:
        """
        Look up a vendor's change and payment history.

        Args:
            vendor_key: The vendor key.

        Returns:
            The vendor's history as JSON.
        """
        return self._act("lookup_vendor_history", {"vendor_key": vendor_key})

    def lookup_policy(self, rule_id: Optional[str] = None) -> str:
        """
        Read the accounts-payable policy.

        Args:
            rule_id: A policy rule id; all rules when omitted.

        Returns:
            The policy rules as JSON.
        """
        return self._act("lookup_policy", {"rule_id": rule_id} if rule_id else {})

    def lookup_po(self, po_id: str) -> str:
        """
        Look up a purchase order.

        Args:
            po_id: The purchase order id.

        Returns:
            The purchase order as JSON.
        """
        return self._act("lookup_po", {"po_id": po_id})

    def lookup_receipt(self, receipt_id: str) -> str:
        """
        Look up a goods receipt.

        Args:
            receipt_id: The goods receipt id.

        Returns:
            The goods receipt as JSON.
        """
        return self._act("lookup_receipt", {"receipt_id": receipt_id})

    def search_ledger(self, vendor_key: Optional[str] = None, invoice_number: Optional[str] = None, amount: Optional[float] = None) -> str:
        """
        Search the payment ledger for matching or duplicate payments.

        Args:
            vendor_key: Filter by vendor key.
            invoice_number: Filter by invoice number.
            amount: Match by amount.

        Returns:
            The matching ledger rows with match scores as JSON.
        """
        payload = {k: v for k, v in (("vendor_key", vendor_key), ("invoice_number", invoice_number), ("amount", amount)) if v is not None}
        return self._act("search_ledger", payload)

    def inspect_email_thread(self, thread_id: str) -> str:
        """
        Inspect an email thread for spoofing, urgency and policy-override requests.

        Args:
            thread_id: The email thread id or the email document id.

        Returns:
            The thread's sender profile and detected signals as JSON.
        """
        return self._act("inspect_email_thread", {"thread_id": thread_id})

    def compare_bank_account(self, vendor_key: str, proposed_bank_account: str) -> str:
        """
        Compare a bank account with the vendor master's approved account.

        Args:
            vendor_key: The vendor key.
            proposed_bank_account: The account the invoice asks to pay.

        Returns:
            Whether the account matches, as JSON.
        """
        return self._act("compare_bank_account", {"vendor_key": vendor_key, "proposed_bank_account": proposed_bank_account})

    # ------------------------------------------------------------------ interventions

    def request_callback_verification(self) -> str:
        """
        Call the vendor back on the number in the vendor master; the result arrives a few steps later.

        Returns:
            The scheduled intervention as JSON.
        """
        return self._act("request_callback_verification", {})

    def freeze_vendor_profile(self) -> str:
        """
        Freeze the vendor profile so no payment can be released to it.

        Returns:
            The intervention's result as JSON.
        """
        return self._act("freeze_vendor_profile", {})

    def request_bank_change_approval_chain(self) -> str:
        """
        Request the approval chain of the vendor's latest bank-account change; arrives later.

        Returns:
            The scheduled intervention as JSON.
        """
        return self._act("request_bank_change_approval_chain", {})

    def request_po_reconciliation(self) -> str:
        """
        Request a purchase-order reconciliation report; arrives later.

        Returns:
            The scheduled intervention as JSON.
        """
        return self._act("request_po_reconciliation", {})

    def request_additional_receipt_evidence(self) -> str:
        """
        Request additional goods-receipt evidence; arrives later.

        Returns:
            The scheduled intervention as JSON.
        """
        return self._act("request_additional_receipt_evidence", {})

    def route_to_procurement(self) -> str:
        """
        Route the case to procurement.

        Returns:
            The intervention's result as JSON.
        """
        return self._act("route_to_procurement", {})

    def route_to_security(self) -> str:
        """
        Route the case to the security team.

        Returns:
            The intervention's result as JSON.
        """
        return self._act("route_to_security", {})

    def flag_duplicate_cluster_review(self) -> str:
        """
        Flag the invoice's duplicate cluster for review; a cluster report arrives later.

        Returns:
            The scheduled intervention as JSON.
        """
        return self._act("flag_duplicate_cluster_review", {})

    def create_human_handoff(self, summary: str, recommended_next_step: str) -> str:
        """
        Hand the case to a human reviewer.

        Args:
            summary: What you found.
            recommended_next_step: What the human should do next.

        Returns:
            The intervention's result as JSON.
        """
        return self._act("create_human_handoff", {"summary": summary, "recommended_next_step": recommended_next_step})

    # ------------------------------------------------------------------ final action

    def submit_decision(
        self,
        decision: str,
        confidence: float,
        reason_codes: Optional[List[str]] = None,
        fraud_flags: Optional[List[str]] = None,
        discrepancies: Optional[List[str]] = None,
        policy_checks: Optional[Dict[str, str]] = None,
        evidence_map: Optional[Dict[str, Any]] = None,
        notes: Optional[str] = None,
    ) -> str:
        """
        Submit the final decision; this ends and grades the episode.

        Args:
            decision: One of PAY, HOLD, NEEDS_REVIEW, ESCALATE_FRAUD.
            confidence: Confidence in the decision, between 0 and 1.
            reason_codes: Canonical reason codes supporting the decision.
            fraud_flags: Fraud indicators found.
            discrepancies: Discrepancy codes such as price_mismatch or missing_receipt.
            policy_checks: Policy check name to "pass" or "fail".
            evidence_map: Claim to evidence reference ({doc_id, page, bbox, token_ids}).
            notes: Free-text notes.

        Returns:
            The grading result, including final_score, as JSON.
        """
        try:
            payload = submit_decision_payload(
                decision,  # type: ignore[arg-type]
                confidence=confidence,
                reason_codes=reason_codes,
                fraud_flags=fraud_flags,
                discrepancies=discrepancies,
                policy_checks=policy_checks,
                evidence_map=evidence_map,
                notes=notes,
            )
        except Exception as e:  # pydantic.ValidationError: report it to the model as a tool error
            raise ValueError(f"invalid submission: {e}") from e
        return self._act("submit_decision", payload)


def environment_factory(base_url: Optional[str] = None, reply_mode: str = "compact", carry_memory: bool = False,
                        grade_unsubmitted: bool = True) -> type:
    """A :class:`LedgerShieldToolEnv` subclass bound to these settings (TRL instantiates it with
    no arguments): in process when ``base_url`` is ``None`` (the default), else against the
    server at ``base_url``."""
    if reply_mode not in ("compact", "full", "ledger"):
        raise ValueError(f"reply_mode must be 'compact', 'full' or 'ledger', not {reply_mode!r}")
    return type("LedgerShieldToolEnv", (LedgerShieldToolEnv,), {"base_url": base_url, "reply_mode": reply_mode,
                                                                "carry_memory": carry_memory, "grade_unsubmitted": grade_unsubmitted})
