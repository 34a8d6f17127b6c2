"""The evidence ledger for the training code: a thin wrapper over the Rust ledger.

One ledger folds an episode's replies for every consumer: the Rust agents' prompts, the
structured observation and this package (``ls_rl::Ledger``, bound as
``ledgershield._native.EvidenceLedger``). Nothing is folded here: :class:`EvidenceLedger` hands
each reply's JSON text to the Rust ledger and reads back its rows (:class:`LedgerView`), each a
thing the agent saw (a catalogue document, an OCR line with the token it came from, an e-mail
thread's header, a vendor master record, a history change, a bank comparison, a ledger hit, a PO
or receipt record, a delivered artifact) with its class (the field a line shows: ``po_id``,
``total``, ``bank_account``, ...), its value, the reference a submission cites it by and its
relations to the other rows (``matches_po``, ``differs_from_master``, ``ledger_exact``, ...,
computed from revealed rows only).

:meth:`LedgerView.render` is the Rust text (one line per row with its flags and citation:
``[7] line po_id (INV-D-001 d001-t46): PO: PO-2048``), so a step prompt carrying it lets a
submission be written from the current prompt alone (:func:`covered`, measured by
:func:`measure`). The views below (ids by key, the facts, the letterheads) are read-only
projections of those rows for the pointer policies.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

# Record keys whose values are ids an action or a submission takes (``{"po_id": ...}`` citations).
RECORD_ID_KEYS = ("vendor_key", "po_id", "receipt_id", "ledger_id", "thread_id", "change_id", "artifact_id")
# Line classes whose value is an id (what ``lookup_po`` or ``compare_bank_account`` takes).
LINE_ID_CLASSES = {"po_id": "po_id", "receipt_id": "receipt_id", "invoice_number": "invoice_number", "bank_account": "bank_account"}
# The observation fields a reply envelope carries that a client-side observation model may lack.
_OBS_DEFAULTS: Dict[str, Any] = {"sprt_state": {}, "tool_rankings": {}, "reward_machine": {}, "institutional_memory": {},
                                 "case_metadata": {}, "portfolio_context": {}, "messages": [], "revealed_artifacts": [],
                                 "pending_events": [], "last_tool_result": {}}


def _native_ledger() -> Any:
    from .._native import EvidenceLedger as Native

    return Native()


class LedgerView:
    """The ledger after one reply: its rows and counters as the Rust ledger reports them
    (immutable: a new view after every reply, so a view is its own snapshot)."""

    def __init__(self, data: Optional[Dict[str, Any]] = None, text: str = "") -> None:
        d = data or {}
        self.text = text
        self.task: Optional[str] = d.get("task")
        self.rows: List[Dict[str, Any]] = list(d.get("rows") or [])
        self.docs: List[Dict[str, Any]] = list(d.get("docs") or [])
        self.signals: List[str] = list(d.get("signals") or [])
        self.cited: List[str] = list(d.get("cited_ids") or [])
        self.dropped_rows = int(d.get("dropped_rows") or 0)
        self.steps_left = int(d.get("steps_left") or 0)
        self.vendor_key: Optional[str] = d.get("vendor_key")
        self.artifacts: List[str] = list(d.get("artifacts") or [])
        self._pairs: Optional[List[Tuple[str, str]]] = None

    def render(self) -> str:
        """The Rust text (``Ledger::render``)."""
        return self.text

    @property
    def lines(self) -> List[Dict[str, Any]]:
        """The OCR line rows, in ledger order."""
        return [r for r in self.rows if r["kind"] == "line"]

    def id_pairs(self) -> List[Tuple[str, str]]:
        """``(key, value)`` of every id revealed, in row order, each once: the ids of records'
        references (``vendor_key``, ``po_id``, ``ledger_id``, ...), a thread's vendor key, a bank
        comparison's account and the id a field line shows (``po_id`` of ``PO: PO-7``)."""
        if self._pairs is None:
            out: List[Tuple[str, str]] = []
            for r in self.rows:
                if r["kind"] == "line":
                    key = LINE_ID_CLASSES.get(r["class"])
                    found = [(key, r["value"])] if key and r.get("value") else []
                else:
                    ref = r.get("reference") or {}
                    found = [(k, ref[k]) for k in RECORD_ID_KEYS if isinstance(ref.get(k), str) and ref[k]]
                    if r["kind"] == "thread" and r.get("value"):
                        found.append(("vendor_key", r["value"]))
                    if r["kind"] == "bank_check" and r.get("value"):
                        found.append(("bank_account", r["value"]))
                for pair in found:
                    if pair not in out:
                        out.append(pair)
            self._pairs = out
        return self._pairs

    @property
    def ids(self) -> Dict[str, List[str]]:
        """The revealed ids by key (:meth:`id_pairs` grouped)."""
        out: Dict[str, List[str]] = {}
        for k, v in self.id_pairs():
            out.setdefault(k, []).append(v)
        return out

    @property
    def facts(self) -> List[str]:
        """What the rows' relations say, each once: ``kind.class.flag`` (``line.total.matches_po``,
        ``bank_check.bank_account.differs_from_master``, ``po.po_id.result_bad``)."""
        out: Dict[str, None] = {}
        for r in self.rows:
            for f in r.get("flags") or []:
                out[f"{r['kind']}.{r['class']}.{f}"] = None
        return list(out)

    @property
    def headers(self) -> Dict[str, str]:
        """Each read invoice's letterhead (its first line: the vendor's name), by document."""
        return {r["doc_id"]: str(r["value"] or r["text"]) for r in self.rows if r["kind"] == "line" and r["class"] == "vendor_name" and r.get("doc_id")}


class EvidenceLedger:
    """One episode's ledger: feed it every reply (:meth:`absorb`, the reset's first); read it
    through :attr:`view` (or the same names on the ledger itself)."""

    def __init__(self) -> None:
        self._native = _native_ledger()
        self.view = LedgerView()

    def absorb(self, reply: Any) -> LedgerView:
        """Fold one reply envelope (its JSON text, or the parsed mapping); returns the new view."""
        text = reply if isinstance(reply, str) else json.dumps(reply, default=_json_default)
        self._native.absorb(text)
        self.view = LedgerView(json.loads(self._native.view()), self._native.render())
        return self.view

    def observe(self, observation: Dict[str, Any], done: bool = False) -> LedgerView:
        """Fold a bare observation (a client's observation model, without the envelope)."""
        obs = dict(_OBS_DEFAULTS, **{k: v for k, v in observation.items() if v is not None})
        return self.absorb({"observation": obs, "reward": 0.0, "done": bool(done or obs.get("done")),
                            "truncated": bool(obs.get("truncated")), "terminated": bool(obs.get("terminated")), "info": {}})

    def snapshot(self) -> LedgerView:
        return self.view

    def __getattr__(self, name: str) -> Any:  # the view's names on the ledger itself
        if name.startswith("_") or name == "view":
            raise AttributeError(name)
        return getattr(self.view, name)


def _json_default(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    raise TypeError(f"{type(v).__name__} is not JSON")


def ledger_prompt(step_prompt: str, ledger: Any) -> str:
    """A step prompt with the ledger inserted before its last line (``Return JSON only.``),
    exactly as the Rust ``llm`` agent's ``extend_prompt`` inserts it."""
    text = ledger.render()
    if not text:
        return step_prompt
    head, sep, tail = step_prompt.rpartition("\n")
    extra = f"Evidence so far:\n{text}\n"
    return f"{head}\n{extra}{tail}" if sep else f"{step_prompt}\n{extra}"


def cited_ids(payload: Dict[str, Any]) -> Set[str]:
    """The ids a submission cites: every string of its evidence map but pages and boxes
    (document ids, token ids, record ids), and its duplicate and cross-invoice links."""
    out: Set[str] = set()

    def walk(v: Any, key: str = "") -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k not in ("page", "bbox"):
                    walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, str) and v:
            out.add(v)

    walk(payload.get("evidence_map") or {})
    for k in ("duplicate_links", "cross_invoice_links"):
        walk(payload.get(k) or [])
    return out


def covered(payload: Dict[str, Any], prompt: str) -> bool:
    """Whether every id the submission cites appears in ``prompt``."""
    return all(i in prompt for i in cited_ids(payload))


def reset_of(record: Dict[str, Any]) -> Dict[str, Any]:
    """The reset an episode record replays from: its ``reset`` (a task draw), else its case id in
    a fresh institution (a record ``ledgershield run`` stored)."""
    return record.get("reset") or {"case_id": record["case_id"], "fresh_institution": True}


def replay_ledgers(env: Any, reset: Dict[str, Any], actions: Iterable[Dict[str, Any]]) -> Iterator[Tuple[Dict[str, Any], LedgerView, Dict[str, Any]]]:
    """Replay ``actions`` from ``env.reset_text(**reset)`` (a task draw, or a case id in a
    fresh institution: :func:`reset_of`); yields ``(envelope before the action, ledger view
    before it, action)``."""
    led = EvidenceLedger()
    text = env.reset_text(**reset)
    envelope = loads(text)
    led.absorb(text)
    for a in actions:
        yield envelope, led.view, a
        if envelope.get("done"):
            return
        text = env.step_text({"action_type": a["action_type"], "payload": a["payload"]})
        envelope = loads(text)
        led.absorb(text)


def loads(text: str) -> Any:
    """A reply's JSON with numbers kept as written (``Decimal``), so a prompt built from it
    prints amounts exactly as the server wrote them (``15000.00``)."""
    return json.loads(text, parse_float=Decimal)


def teacher_records(db: Any) -> List[Dict[str, Any]]:
    """Every stored episode record of ``db`` (a ``runs.db``), in run and play order."""
    import sqlite3

    with sqlite3.connect(str(db)) as con:
        rows = con.execute("SELECT base_case_id, record_json FROM episodes ORDER BY run_id, idx").fetchall()
    return [dict(json.loads(r[1]), base_case_id=r[0]) for r in rows]


def _pct(xs: List[int], q: float) -> float:
    s = sorted(xs)
    return float(s[min(len(s) - 1, int(round(q * (len(s) - 1))))]) if s else 0.0


def measure(episodes: Iterable[Dict[str, Any]], tokenizer: Any = None) -> Dict[str, Any]:
    """Replay each submitted episode (``{"reset": ..., "trajectory": [...]}`` or a stored record
    with its ``case_id``: :func:`reset_of`; the trajectory's
    steps carrying the recorded ``prompt`` when there is one) in process and measure the ledger:
    its size at every step (tokens with ``tokenizer``, else characters), and the share of
    submissions whose cited ids all appear in their own step prompt, without and with the
    ledger."""
    from ..native import ControlBenchEnv, EnvError
    from .constrained import step_prompt

    sizes: List[int] = []
    prompt_sizes: List[int] = []
    n = plain = with_ledger = skipped = diverged = dropped = 0
    for ep in episodes:
        traj = ep.get("trajectory") or []
        if not traj or traj[-1].get("action_type") != "submit_decision":
            continue
        try:
            steps = list(replay_ledgers(ControlBenchEnv(), reset_of(ep), traj))
        except EnvError:
            skipped += 1  # a case this process's pool does not hold
            continue
        history: List[str] = []
        for envelope, view, a in steps:
            base = a.get("prompt") or step_prompt(envelope["observation"], history)
            history.append(a["action_type"])
            text = view.render()
            full = ledger_prompt(base, view)
            sizes.append(len(tokenizer(text)["input_ids"]) if tokenizer is not None else len(text))
            prompt_sizes.append(len(tokenizer(full)["input_ids"]) if tokenizer is not None else len(full))
            dropped = max(dropped, view.dropped_rows)
            if a["action_type"] == "submit_decision":
                n += 1
                plain += covered(a["payload"], base)
                with_ledger += covered(a["payload"], full)
        if len(steps) != len(traj):
            diverged += 1
    unit = "tokens" if tokenizer is not None else "chars"
    return {"submissions": n, "skipped_episodes": skipped, "diverged_episodes": diverged, "unit": unit, "max_dropped_rows": dropped,
            "covered_without_ledger": round(plain / max(n, 1), 4), "covered_with_ledger": round(with_ledger / max(n, 1), 4),
            "ledger_median": _pct(sizes, 0.5), "ledger_p95": _pct(sizes, 0.95), "ledger_max": float(max(sizes or [0])),
            "prompt_median": _pct(prompt_sizes, 0.5), "prompt_p95": _pct(prompt_sizes, 0.95), "prompt_max": float(max(prompt_sizes or [0]))}
