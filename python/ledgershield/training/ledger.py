"""The evidence ledger: what an episode has revealed so far, compact enough to ride in every step
prompt, so that a submission can be written from the current prompt alone.

A step prompt shows only the last tool result; a submission cites ids (token ids, vendor keys,
PO and receipt numbers, ledger ids) revealed many steps earlier. :class:`EvidenceLedger` folds
every observation of an episode into

* ``ids``: identifier fields revealed so far (``vendor_key``, ``po_id``, ``receipt_id``, ledger
  ids, thread ids, invoice numbers, bank accounts, ...), each value once;
* ``values``: amounts and verdicts (``total``, ``match``, ``exact_duplicate_count``, ...);
* ``ocr``: OCR lines (from ``ocr``/``zoom``) as ``token_id text [x0,y0,x1,y1]`` under their
  document and page, each token once (a later pass of the same document replaces text);
* ``signals``: the observed risk signals.

:meth:`EvidenceLedger.render` is the compact text (a few hundred tokens on most cases);
:func:`cited_ids` lists the ids a submission cites, for the self-sufficiency measure
(:func:`covered`).
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

# Keys whose scalar values are identifiers a submission may cite.
ID_KEYS = re.compile(r"(^|_)(id|ids|key|number|account|thread|links?)$|^(vendor_key|po_id|receipt_id|ledger_id|invoice_id|thread_id|artifact_id|doc_id|bank_account|proposed_bank_account|approved_bank_account|invoice_number)$")
VALUE_KEYS = re.compile(r"(amount|total|subtotal|tax|count|match|matched|score|status|verdict|approved|currency|date|days|risk|spoof|urgency)", re.I)
SKIP_KEYS = {"tool_name", "control_boundary", "reward_model", "cost", "novel_signal_count", "scope", "message", "success",
             "tokens", "focus_tokens", "text_preview", "focus_text", "visual_tokens", "bbox", "page", "mode", "crop_hint"}
MAX_VALUE_CHARS = 60
MAX_LINE_CHARS = 56
# Tools whose verdicts and amounts the ledger keeps (a submission's own grading report is not evidence).
VALUE_TOOLS = {"lookup_vendor", "lookup_vendor_history", "lookup_po", "lookup_receipt", "search_ledger",
               "inspect_email_thread", "compare_bank_account", "lookup_policy"}
# OCR lines kept: those carrying a value (a digit, a `label:`) or a control cue; boilerplate
# (greetings, addresses without numbers, sign-offs) is dropped.
CUE = re.compile(r"[0-9]|:|bank|account|urgent|skip|approv|verif|callback|change|override|immediately|confidential|"
                 r"wire|remit|invoice|payment|release|bypass|new|update|portal|duplicate|resend", re.I)
BOILERPLATE = re.compile(r"^(To|Cc|Sent|Importance|Customer No|Bill To|VAT|GSTIN|Page \d+ of|Thank you|Printed from)\b", re.I)


def _scalar(v: Any) -> Optional[str]:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, Decimal)):
        return f"{round(float(v), 4):g}"
    if isinstance(v, str) and v.strip():
        return v.strip()[:MAX_VALUE_CHARS]
    return None


def _box(b: Any) -> str:
    try:
        return ",".join(str(int(round(float(x)))) for x in b)
    except (TypeError, ValueError):
        return ""


class EvidenceLedger:
    """Everything an episode revealed so far, in order of first appearance."""

    def __init__(self) -> None:
        self.ids: Dict[str, List[str]] = {}
        self.values: Dict[str, str] = {}
        self.ocr: Dict[Tuple[str, int], Dict[str, Tuple[str, str]]] = {}
        self.signals: List[str] = []
        self.refs: List[Dict[str, Any]] = []  # citable references, for pointer policies
        # the top line of each OCR'd document's first page (an invoice's letterhead: its vendor
        # name), kept aside: not part of the rendered ledger
        self.headers: Dict[str, str] = {}

    # ------------------------------------------------------------------ folding observations

    def observe(self, observation: Dict[str, Any]) -> None:
        """Fold one observation (the envelope's ``observation`` mapping) into the ledger."""
        for s in (observation.get("risk_snapshot") or {}).get("observed_signals") or []:
            if s not in self.signals:
                self.signals.append(s)
        result = observation.get("last_tool_result")
        if isinstance(result, dict):
            self._result(result)

    def _result(self, r: Dict[str, Any]) -> None:
        tool = str(r.get("tool_name", ""))
        if tool == "submit_decision":
            return
        doc = str(r.get("doc_id", ""))
        if tool == "ocr" and doc and doc not in self.headers:
            top = [t for t in r.get("tokens") or [] if isinstance(t, dict) and int(t.get("page") or 1) == 1 and len(t.get("bbox") or []) == 4]
            if top:
                self.headers[doc] = str(min(top, key=lambda t: (float(t["bbox"][1]), float(t["bbox"][0])))["text"]).strip()
        for key in ("tokens", "focus_tokens"):
            for t in r.get(key) or []:
                if isinstance(t, dict) and t.get("token_id"):
                    self._token(str(t.get("doc_id") or doc), t)
        self._walk(tool, r, depth=0)

    def _token(self, doc: str, t: Dict[str, Any]) -> None:
        page = int(t.get("page") or 1)
        text = str(t.get("text", ""))
        if not CUE.search(text) or BOILERPLATE.search(text):
            return
        lines = self.ocr.setdefault((doc, page), {})
        tid = str(t["token_id"])
        if tid not in lines:
            self.refs.append({"kind": "ocr", "doc_id": doc, "page": page, "bbox": [float(x) for x in (t.get("bbox") or [])],
                              "token_ids": [tid], "text": str(t.get("text", ""))})
        lines[tid] = (text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "~", _box(t.get("bbox") or []))

    def _walk(self, tool: str, v: Any, depth: int, key: str = "") -> None:
        if depth > 5:
            return
        if isinstance(v, dict):
            for k, x in v.items():
                if depth == 0 and k in SKIP_KEYS or k in ("tokens", "focus_tokens", "bbox", "rule_id", "thread_id"):
                    continue
                self._walk(tool, x, depth + 1, k)
        elif isinstance(v, list):
            for x in v[:64]:
                self._walk(tool, x, depth + 1, key)
        else:
            s = _scalar(v)
            if s is None or not key:
                return
            if ID_KEYS.search(key) and isinstance(v, str):
                vals = self.ids.setdefault(key, [])
                if s not in vals:
                    vals.append(s)
                    self.refs.append({"kind": "id", "key": key, "value": s, "tool": tool})
            elif tool in VALUE_TOOLS and VALUE_KEYS.search(key) and (not isinstance(v, str) or len(s) <= 24):
                self.values[f"{tool}.{key}"] = s

    # ------------------------------------------------------------------ views

    def known_ids(self) -> Set[str]:
        out = {v for vals in self.ids.values() for v in vals}
        out.update(tid for lines in self.ocr.values() for tid in lines)
        out.update(d for d, _ in self.ocr)
        return out

    def render(self) -> str:
        """The compact text: ids, values, signals, then OCR lines by document and page."""
        parts: List[str] = []
        if self.ids:
            parts.append("ids: " + "; ".join(f"{k}={','.join(v)}" for k, v in self.ids.items()))
        if self.values:
            parts.append("values: " + "; ".join(f"{k}={v}" for k, v in self.values.items()))
        if self.signals:
            parts.append("signals: " + ", ".join(self.signals))
        for (doc, page), lines in self.ocr.items():
            prefix = _common_prefix(list(lines))
            head = f"ocr {doc}" + (f" p{page}" if page != 1 else "") + (f" (token ids {prefix}#):" if prefix else ":")
            parts.append(head + "".join(f"\n {tid[len(prefix):]} {text} [{box}]" for tid, (text, box) in lines.items()))
        return "\n".join(parts)

    def to_json(self) -> Dict[str, Any]:
        """The ledger as a mapping (the ToolEnv reply's ``ledger`` field)."""
        out: Dict[str, Any] = {}
        if self.ids:
            out["ids"] = {k: list(v) for k, v in self.ids.items()}
        if self.values:
            out["values"] = dict(self.values)
        if self.signals:
            out["signals"] = list(self.signals)
        if self.ocr:
            out["ocr"] = {doc + (f" p{page}" if page != 1 else ""): [f"{tid} {text} [{box}]" for tid, (text, box) in lines.items()]
                          for (doc, page), lines in self.ocr.items()}
        return out


def _common_prefix(ids: List[str]) -> str:
    """The id prefix shared by a document's token ids, up to and including its last ``-t``
    (``d001-t``), or empty."""
    if not ids:
        return ""
    first = ids[0]
    cut = first.rfind("-t")
    prefix = first[: cut + 2] if cut >= 0 else ""
    return prefix if prefix and all(i.startswith(prefix) for i in ids) else ""


TOKEN_GROUP = re.compile(r"\(token ids (\S+)#\):((?:\n [^\n]*)*)")


def prompt_ids(prompt: str) -> Set[str]:
    """Token ids written in a prompt's ledger (prefix + line number), expanded."""
    out: Set[str] = set()
    for m in TOKEN_GROUP.finditer(prompt):
        for line in m.group(2).split("\n")[1:]:
            suffix = line.strip().split(" ", 1)[0]
            if suffix:
                out.add(m.group(1) + suffix)
    return out


def ledger_prompt(step_prompt: str, ledger: EvidenceLedger) -> str:
    """A step prompt with the ledger inserted before its last line (``Return JSON only.``)."""
    text = ledger.render()
    if not text:
        return step_prompt
    head, sep, tail = step_prompt.rpartition("\n")
    if not sep:
        return f"{step_prompt}\nEvidence so far:\n{text}"
    return f"{head}\nEvidence so far:\n{text}\n{tail}"


def cited_ids(payload: Dict[str, Any]) -> Set[str]:
    """The ids a submission cites: every token id, and every id-keyed value of its evidence map,
    duplicate and cross-invoice links."""
    out: Set[str] = set()

    def walk(v: Any, key: str = "") -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, str) and key and (key == "token_ids" or ID_KEYS.search(key)):
            out.add(v)

    walk(payload.get("evidence_map") or {})
    for k in ("duplicate_links", "cross_invoice_links"):
        walk(payload.get(k) or [], "links")
    return out


def covered(payload: Dict[str, Any], prompt: str) -> bool:
    """Whether every id the submission cites appears in ``prompt`` (literally, or as a ledger
    token id: its document's prefix plus the line's number)."""
    expanded = prompt_ids(prompt)
    return all(i in prompt or i in expanded for i in cited_ids(payload))


def replay_ledgers(env: Any, case_id: str, actions: Iterable[Dict[str, Any]]) -> Iterable[Tuple[Dict[str, Any], EvidenceLedger, Dict[str, Any]]]:
    """Replay ``actions`` on ``case_id`` in a native ``ControlBenchEnv`` (fresh institution);
    yields ``(envelope before the action, ledger before the action, action)``."""
    led = EvidenceLedger()
    env_ = loads(env.reset_text(case_id=case_id, fresh_institution=True))
    led.observe(env_["observation"])
    for a in actions:
        yield env_, led, a
        if env_.get("done"):
            return
        env_ = loads(env.step_text({"action_type": a["action_type"], "payload": a["payload"]}))
        led.observe(env_["observation"])


def loads(text: str) -> Any:
    """A reply's JSON with numbers kept as written (``Decimal``), so a prompt built from it
    prints amounts exactly as the server wrote them (``15000.00``)."""
    return json.loads(text, parse_float=Decimal)


def dumps_compact(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def teacher_records(db: Any) -> List[Dict[str, Any]]:
    """Every stored episode record of ``db`` (a ``runs.db``), in run and play order."""
    import sqlite3

    with sqlite3.connect(str(db)) as con:
        rows = con.execute("SELECT base_case_id, record_json FROM episodes ORDER BY run_id, idx").fetchall()
    return [dict(json.loads(r[1]), base_case_id=r[0]) for r in rows]


def _pct(xs: List[int], q: float) -> float:
    s = sorted(xs)
    return float(s[min(len(s) - 1, int(round(q * (len(s) - 1))))]) if s else 0.0


def measure(records: List[Dict[str, Any]], tokenizer: Any = None) -> Dict[str, Any]:
    """Replay each submitted record in process and measure the ledger: its size at every step
    (tokens with ``tokenizer``, else characters), and the share of submissions whose cited ids
    all appear in their own step prompt, without and with the ledger."""
    from ..native import ControlBenchEnv, EnvError

    sizes: List[int] = []
    prompt_sizes: List[int] = []
    n = plain = with_ledger = skipped = diverged = 0
    for rec in records:
        traj = rec.get("trajectory") or []
        if not traj or traj[-1].get("action_type") != "submit_decision":
            continue
        env = ControlBenchEnv()
        try:
            steps = list(replay_ledgers(env, rec["case_id"], traj))
        except EnvError:
            skipped += 1  # a case this process's pool does not hold
            continue
        for envelope, led, a in steps:
            text = led.render()
            full = ledger_prompt(a.get("prompt", ""), led)
            sizes.append(len(tokenizer(text)["input_ids"]) if tokenizer is not None else len(text))
            prompt_sizes.append(len(tokenizer(full)["input_ids"]) if tokenizer is not None else len(full))
            if a["action_type"] == "submit_decision":
                n += 1
                plain += covered(a["payload"], a.get("prompt", ""))
                with_ledger += covered(a["payload"], full)
        if len(steps) != len(traj):
            diverged += 1
    unit = "tokens" if tokenizer is not None else "chars"
    return {"submissions": n, "skipped_episodes": skipped, "diverged_episodes": diverged, "unit": unit,
            "covered_without_ledger": round(plain / max(n, 1), 4), "covered_with_ledger": round(with_ledger / max(n, 1), 4),
            "ledger_median": _pct(sizes, 0.5), "ledger_p95": _pct(sizes, 0.95), "ledger_max": float(max(sizes or [0])),
            "prompt_median": _pct(prompt_sizes, 0.5), "prompt_p95": _pct(prompt_sizes, 0.95), "prompt_max": float(max(prompt_sizes or [0]))}
