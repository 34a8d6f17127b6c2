"""A TRL-ready tool environment: pass the class to ``GRPOTrainer(environment_factory=...)``.

TRL creates one instance per generation, calls ``reset(**dataset_columns)`` and exposes every
public method other than ``reset`` as a function-calling tool (its docstring's ``Args:`` section
becomes the tool schema). After the rollout the reward function reads ``env.reward``: the
episode's final grade once ``submit_decision`` (or a step/budget limit) ends it, else 0.0.

The server URL comes from ``LEDGERSHIELD_URL`` (default ``http://127.0.0.1:8000``); use
:func:`environment_factory` to bind another URL, since TRL calls the class with no arguments.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

from .client import LedgerShieldEnv, LedgerShieldServerError
from .models import ControlBenchAction, ControlBenchObservation
from .submission import submit_decision_payload

DEFAULT_URL = "http://127.0.0.1:8000"
RESET_KEYS = ("case_id", "seed", "track", "custom_case")


def _compact(value: Any, limit: int = 4000) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 15] + "...(truncated)"


class LedgerShieldToolEnv:
    """LedgerShield ControlBench as a set of tools, one per action."""

    base_url: Optional[str] = None

    def __init__(self) -> None:
        url = type(self).base_url or os.environ.get("LEDGERSHIELD_URL", DEFAULT_URL)
        self._client = LedgerShieldEnv(base_url=url).sync()
        self.reward: float = 0.0
        self.done: bool = False
        self.final_score: Optional[float] = None
        self.observation: Optional[ControlBenchObservation] = None

    def __enter__(self) -> "LedgerShieldToolEnv":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close()

    def __del__(self) -> None:
        try:
            self._close()
        except Exception:
            pass

    def _close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()

    def reset(self, **kwargs: Any) -> str:
        """Start an episode. Dataset columns ``case_id``, ``seed``, ``track`` and ``custom_case``
        select the case; other columns (``prompt``, ...) are ignored."""
        params = {k: kwargs[k] for k in RESET_KEYS if kwargs.get(k) is not None}
        result = self._client.reset(**params)
        self.reward = 0.0
        self.done = False
        self.final_score = None
        self.observation = result.observation
        return self._describe_case(result.observation)

    @staticmethod
    def _describe_case(obs: ControlBenchObservation) -> str:
        docs = ", ".join(f"{d.doc_id} ({d.doc_type}, {d.page_count} page(s))" for d in obs.visible_documents)
        return (
            f"Case {obs.case_id} ({obs.task_type}).\n{obs.instruction}\n"
            f"Documents: {docs or 'none'}.\n"
            f"Budget {obs.budget_remaining:g}/{obs.budget_total:g}, at most {obs.max_steps} steps. "
            "End the episode with submit_decision."
        )

    def _act(self, action_type: str, payload: Dict[str, Any]) -> str:
        if self.done:
            raise ValueError("The episode is over; no more actions are accepted.")
        try:
            result = self._client.step(ControlBenchAction(action_type=action_type, payload=payload))  # type: ignore[arg-type]
        except LedgerShieldServerError as e:
            raise ValueError(e.message) from e
        obs = result.observation
        self.observation = obs
        self.done = bool(result.done)
        if self.done:
            self.final_score = obs.final_score
            self.reward = float(self.final_score or 0.0)
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


def environment_factory(base_url: str) -> type:
    """A :class:`LedgerShieldToolEnv` subclass bound to ``base_url`` (TRL instantiates it with no arguments)."""
    return type("LedgerShieldToolEnv", (LedgerShieldToolEnv,), {"base_url": base_url})
