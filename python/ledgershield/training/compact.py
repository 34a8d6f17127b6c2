"""A compact state prompt and a compact action language for small language models.

The environment's step prompt with the evidence ledger is about 2,200 BPE tokens at the median,
and a submission's JSON hundreds more: too long to learn from random weights in minutes on a CPU.
This module gives a language model a much smaller interface over the same observation:

* **Pointer table** (:class:`Table`): the evidence ledger's entries (the Rust ledger's rows,
  :mod:`.ledger`) numbered in order of first appearance: ``d0 d1 ...`` for the visible documents,
  ``k0 k1 ...`` for the identifiers revealed (vendor keys, PO and receipt ids, bank accounts,
  ledger ids, ...), ``r0 r1 ...`` for the OCR lines the ledger keeps (each a citable reference).
* **State prompt** (:func:`state_tokens`): a few hundred word tokens: the task family, steps
  left, the observed signals, the ledger's facts (its rows' relations: ``f:line.total.matches_po``,
  ``f:bank_check.bank_account.differs_from_master``), the documents by type, the ids by key, the
  actions played so far in the compact language, and a progress block next to ``<act>``
  (:func:`progress_tokens`: what is unread, what was played, which PO / receipt numbers no action
  took yet). The OCR lines are not listed: where a field takes one, the grammar offers the lines
  the table holds by descriptor (``lab:total n:0``).
* **Line descriptors** (:func:`line_label`): a line is named by the field the Rust ledger reads
  it as (``lab:po_id``, ``lab:total``, ``lab:bank_account``, an e-mail's ``lab:subject`` or
  ``lab:body``) and its first relation (``lab:bank_account~differs_from_master``): names of
  fields and relations, never a vendor's words, so no token identifies a training case.
* **Compact actions** (:func:`encode` / :func:`expand`): ``ocr d1 mode=accurate``,
  ``lookup_vendor k0``, ``search_ledger k0 r7 r12``, ``submit HOLD c:discrepancies:missing_receipt
  chk:three_way_match=fail ev:missing_receipt r5 <eos>``. :func:`expand` turns one into the
  environment's action JSON **deterministically, copying only what the table holds** (an id, a
  document id, an OCR line's reference or the text after its ``label:``) and the vocabulary the
  :class:`Schema` learned from the training rows (action types, enumerated literals such as OCR
  modes, reason codes, check names, claim names, the mean confidence per decision). It never
  reads the case, its gold or the teacher. A field the language cannot express (line items,
  the certificate, the counterfactual) is left out: the environment grades its absence.
* **Grammar** (:func:`allowed`): the tokens legal after an action prefix, given the table (only
  pointers that exist, of the kind the field takes), the actions already played (no exact repeat)
  and the native environment's available interventions, so constrained decoding always yields an
  action that expands.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from .ledger import LedgerView

DECISIONS = ["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD"]
LIST_FIELDS = ("reason_codes", "fraud_flags", "discrepancies", "campaign_signals")
LINK_FIELDS = {"dup": "duplicate_links", "xinv": "cross_invoice_links"}
ID_REF_KEYS = ("vendor_key", "po_id", "receipt_id", "ledger_id", "thread_id", "change_id")
EOS, PAD, UNK, ACT = "<eos>", "<pad>", "<unk>", "<act>"
MAX_DOCS, MAX_IDS, MAX_REFS = 32, 96, 400
MAX_ITEMS = 48
MAX_FACTS = 48
# Id keys that no action or submission field takes (documents are d# pointers): left out of the table.
NOT_POINTERS = {"doc_id", "event_id", "artifact_id", "revealed_artifact_ids", "rule_id", "artifact_ids"}
NUM = re.compile(r"-?\d[\d,]*\.?\d*")
INTERVENTION = ("request_", "route_", "freeze_", "flag_", "create_")


def _num(text: str) -> Optional[float]:
    m = NUM.search(str(text).replace(",", ""))
    if not m:
        return None
    try:
        return float(m.group(0))
    except ValueError:
        return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) < 1e-6
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return False


# ---------------------------------------------------------------------------- the pointer table


class Table:
    """The pointers of one state: documents, ids and OCR references, from the observation and
    the ledger only."""

    def __init__(self, obs: Dict[str, Any], led: LedgerView, native: Optional[Sequence[Dict[str, Any]]] = None) -> None:
        self.docs: List[Tuple[str, str]] = [(str(d["doc_id"]), str(d.get("doc_type"))) for d in (obs.get("visible_documents") or [])][:MAX_DOCS]
        # ids in the ledger's row order (a pointer keeps its meaning while its row stands)
        self.ids: List[Tuple[str, str]] = [(k, v) for k, v in led.id_pairs() if k not in NOT_POINTERS][:MAX_IDS]
        # the vendor the task names (shown from the reset on) and each OCR'd invoice's letterhead:
        # what lookup_vendor takes
        names = [instruction_vendor(str(obs.get("instruction") or ""))]
        names += [led.headers.get(d) for d, t in self.docs if "invoice" in t]
        for name in reversed(list(dict.fromkeys(n for n in names if n))):
            self.ids.insert(0, ("vendor_name", name))
        self.refs: List[Dict[str, Any]] = [line_ref(r) for r in led.lines][:MAX_REFS]
        self.doc_index = {d: i for i, (d, _) in enumerate(self.docs)}
        self._descriptors()
        # the native candidates' payloads by type (a constant field's value, e.g. a handoff's summary)
        self.native: Dict[str, Dict[str, Any]] = {}
        for c in native or []:
            self.native.setdefault(str(c["action_type"]), dict(c.get("payload") or {}))

    def _descriptors(self) -> None:
        """Every pointer as (descriptor token, ordinal): ``dt:invoice n:0``, ``key:vendor_key n:0``,
        ``lab:po n:0`` (an OCR line by its label words); ``resolve`` is the inverse."""
        self.desc: Dict[str, Tuple[str, int]] = {}
        self.resolve: Dict[Tuple[str, int], str] = {}
        seen: Counter = Counter()
        named = [(f"d{i}", f"dt:{t}") for i, (_, t) in enumerate(self.docs)] + [(f"k{i}", f"key:{k}") for i, (k, _) in enumerate(self.ids)]
        named += [(f"r{i}", self.label(r)) for i, r in enumerate(self.refs)]
        for unit, d in named:
            self.desc[unit] = (d, seen[d])
            self.resolve[(d, seen[d])] = unit
            seen[d] += 1

    @staticmethod
    def label(ref: Dict[str, Any]) -> str:
        """An OCR line's descriptor (:func:`line_label`)."""
        return line_label(ref)

    # values a pointer stands for
    def doc(self, tok: str) -> str:
        return self.docs[int(tok[1:])][0]

    def id(self, tok: str) -> Tuple[str, str]:
        return self.ids[int(tok[1:])]

    def ref(self, tok: str) -> Dict[str, Any]:
        return self.refs[int(tok[1:])]

    @staticmethod
    def after(ref: Dict[str, Any]) -> str:
        """The value an OCR line shows: the ledger's value (the text after its ``label:``, the
        whole line when it has none)."""
        v = ref.get("value")
        if v is not None:
            return str(v).strip()
        text = str(ref["text"])
        label, sep, rest = text.partition(": ")
        return (rest if sep else text).strip()

    def pointers(self, kind: str, keys: Optional[Set[str]] = None) -> List[str]:
        if kind == "d":
            return [f"d{i}" for i in range(len(self.docs))]
        if kind == "k":
            return [f"k{i}" for i, (k, _) in enumerate(self.ids) if not keys or k in keys]
        if kind == "any":
            return self.pointers("d") + self.pointers("k", keys) + self.pointers("r")
        if kind in ("r", "ra", "rn"):
            if kind == "rn":
                return [f"r{i}" for i, r in enumerate(self.refs) if _num(self.after(r)) is not None]
            return [f"r{i}" for i in range(len(self.refs))]
        return []

    def value(self, kind: str, tok: str) -> Any:
        """What a field of ``kind`` takes from pointer ``tok``."""
        if kind == "d":
            return self.doc(tok)
        if kind == "k":
            return self.id(tok)[1]
        if kind == "ra":
            return self.after(self.ref(tok)).rstrip("~")
        if kind == "rn":
            return _num(self.after(self.ref(tok)))
        if kind == "any":
            return self.value({"d": "d", "k": "k", "r": "ra"}[tok[0]], tok)
        raise ValueError(f"no value of kind {kind}")

    def find(self, kind: str, v: Any, keys: Optional[Set[str]] = None) -> Optional[str]:
        """The first pointer of ``kind`` whose value equals ``v`` (None when none does)."""
        for tok in self.pointers(kind, keys):
            if _same(self.value(kind, tok), v):
                return tok
        return None

    def ev_value(self, tok: str) -> Dict[str, Any]:
        """An evidence-map value: an OCR reference, or an id as ``{key: value}``."""
        if tok.startswith("r"):
            r = self.ref(tok)
            return {"doc_id": r["doc_id"], "page": r["page"], "bbox": list(r["bbox"]), "token_ids": list(r["token_ids"])}
        k, v = self.id(tok)
        return {k: v}

    def ev_pointer(self, ref: Any) -> Optional[str]:
        if not isinstance(ref, dict):
            return None
        if "token_ids" in ref:
            want = sorted(ref.get("token_ids") or [])
            for i, r in enumerate(self.refs):
                if sorted(r["token_ids"]) == want and r["doc_id"] == ref.get("doc_id"):
                    return f"r{i}"
            return None
        if len(ref) == 1:
            (k, v), = ref.items()
            for i, (k2, v2) in enumerate(self.ids):
                if k2 == k and _same(v2, v):
                    return f"k{i}"
        return None

    def ev_pointers(self) -> List[str]:
        return self.pointers("r") + self.pointers("k", set(ID_REF_KEYS))

    def link_value(self, tok: str) -> str:
        return self.doc(tok) if tok.startswith("d") else self.id(tok)[1]

    def link_pointer(self, v: Any) -> Optional[str]:
        return self.find("k", v) or self.find("d", v)


def instruction_vendor(instruction: str) -> Optional[str]:
    """The vendor a task's instruction names (``Review ... from NAME. ...``), as the teacher reads it."""
    if not instruction.startswith("Review "):
        return None
    _, sep, after = instruction[len("Review "):].partition(" from ")
    if not sep:
        return None
    name = after.partition(". ")[0].strip()
    name = name[:-1] if name.endswith(".") else name
    return name if name and len(name) <= 120 else None


# ---------------------------------------------------------------------------- the state prompt


def line_ref(row: Dict[str, Any]) -> Dict[str, Any]:
    """A ledger line row as a table reference: its citation (``doc_id``, ``page``, ``bbox``,
    ``token_ids``: what an evidence map takes), text, value, class and relations."""
    ref = row.get("reference") or {}
    return {"doc_id": str(ref.get("doc_id") or row.get("doc_id") or ""), "page": ref.get("page", 1), "bbox": list(ref.get("bbox") or []),
            "token_ids": list(ref.get("token_ids") or []), "text": str(row.get("text") or ""), "value": row.get("value"),
            "class": str(row.get("class") or "other"), "flags": list(row.get("flags") or [])}


def line_label(ref: Dict[str, Any]) -> str:
    """An OCR line's descriptor token: ``lab:`` and the field the ledger reads the line as, with
    its first relation when it has one (``lab:bank_account~differs_from_master``)."""
    flags = ref.get("flags") or []
    return f"lab:{ref.get('class') or 'other'}" + (f"~{flags[0]}" if flags else "")


def line_descriptors() -> List[str]:
    """Every line descriptor :func:`line_label` can write (the Rust ledger's line classes, alone
    and with each relation)."""
    from .._native import LEDGER_FLAGS, LEDGER_LINE_CLASSES

    return [f"lab:{c}" + (f"~{f}" if f else "") for c in LEDGER_LINE_CLASSES for f in [None, *LEDGER_FLAGS]]


def class_label(ref: Dict[str, Any]) -> str:
    """An OCR line's field alone (``lab:po_id``): what the progress block counts open values of."""
    return f"lab:{ref.get('class') or 'other'}"


def state_tokens(obs: Dict[str, Any], led: LedgerView, played: Sequence[Sequence[str]], table: Table,
                 arg_labels: Sequence[str] = ()) -> List[str]:
    """The compact state prompt (word tokens), ending with ``<act>``; ``played`` in tokens.
    ``arg_labels`` (the schema's): the OCR line labels tool arguments take, counted in the
    progress block while some value of theirs has not been passed to an action."""
    steps_left = int(obs.get("max_steps") or 0) - int(obs.get("step_count") or 0)
    t: List[str] = [f"task:{obs.get('task_type')}", f"left:{min(max(steps_left, 0), 12)}",
                    f"pending:{min(len(obs.get('pending_events') or []), 3)}"]
    t += [f"art:{a.get('artifact_type') or 'artifact'}" for a in obs.get("revealed_artifacts") or []][:6]
    t.append("|sig")
    t += [f"s:{s}" for s in led.signals]
    t.append("|facts")
    t += [f"f:{x}" for x in led.facts][:MAX_FACTS]
    t.append("|docs")
    t += [f"dt:{dt}" for _, dt in table.docs]
    t.append("|ids")
    t += [f"key:{k}" for k, _ in table.ids]
    # The OCR lines are not listed: the grammar offers their pointers (descriptor, ordinal) where a
    # field takes one, and a listing let the model recognise training cases by their lines (held
    # out 0.36 with it, 0.74 without, same data and budget; TRAINING.md).
    t.append("|did")
    for a in played:
        t += list(a) + [";"]
    t += progress_tokens(obs, played, table, arg_labels)
    t.append(ACT)
    return t


def progress_tokens(obs: Dict[str, Any], played: Sequence[Sequence[str]], table: Table, arg_labels: Sequence[str]) -> List[str]:
    """The progress block, next to ``<act>`` where a small model reads it most easily: the task
    family again, per document type how many documents are not yet read (OCR'd) or inspected,
    per action type how many were played, the last one, and per argument label how many of its
    distinct values no action has taken yet (``open:lab:po=2``: two purchase-order numbers on
    the invoices read so far have not been looked up). Every count is of what the observation
    and the actions played show; nothing comes from the case."""
    used_ptrs: Dict[str, Set[Tuple[str, int]]] = defaultdict(set)  # action type -> pointers it took
    counts: Counter = Counter()
    used_values: Set[str] = set()
    for a in played:
        if not a:
            continue
        counts[a[0]] += 1
        for d, n in zip(a, a[1:]):
            if d.startswith(DESC_PREFIXES) and n.startswith("n:"):
                used_ptrs[a[0]].add((d, int(n[2:])))
                unit = table.resolve.get((d, int(n[2:])))
                if unit is not None:
                    used_values.add(str(table.link_value(unit) if unit[0] in "dk" else Table.after(table.ref(unit))).strip().lower())
    t = ["|now", f"task:{obs.get('task_type')}"]
    for verb, act in (("unread", "ocr"), ("uninspected", "inspect_email_thread")):
        left: Counter = Counter()
        for unit in table.pointers("d"):
            d = table.desc[unit]
            if d not in used_ptrs[act] and (act == "ocr" or d[0] == "dt:email"):
                left[d[0][3:]] += 1
        t += [f"{verb}:{dt}={min(n, 4)}" for dt, n in sorted(left.items())]
    t += [f"did:{a}={min(n, 4)}" for a, n in sorted(counts.items())]
    if played and played[-1]:
        t.append(f"last:{played[-1][0]}")
    wanted = set(arg_labels)
    open_values: Dict[str, Set[str]] = defaultdict(set)
    for r in table.refs:
        lab = class_label(r)
        v = Table.after(r).strip().lower()
        if lab in wanted and v and v not in used_values:
            open_values[lab].add(v)
    t += [f"open:{lab}={min(len(vs), 4)}" for lab, vs in sorted(open_values.items())]
    return t


# ---------------------------------------------------------------------------- the schema


class Schema:
    """The action vocabulary learned from the training rows: the tool types and their fields
    (pointer kind, enumerated literals or a constant), submission heads, confidences."""

    def __init__(self) -> None:
        self.types: List[str] = []
        self.fields: Dict[str, List[Tuple[str, str, Any]]] = {}  # type -> [(field, kind, info)]
        self.heads: List[str] = []  # submission item heads, in canonical order
        self.confidence: Dict[str, float] = {}
        self.arg_labels: List[str] = []  # OCR line labels a tool argument took (the progress block's open counts)

    def to_json(self) -> Dict[str, Any]:
        return {"types": self.types, "fields": self.fields, "heads": self.heads, "confidence": self.confidence, "arg_labels": self.arg_labels}

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Schema":
        s = cls()
        s.types, s.heads, s.confidence = list(d["types"]), list(d["heads"]), dict(d["confidence"])
        s.arg_labels = list(d.get("arg_labels") or [])
        s.fields = {t: [(f, k, (set(i) if k == "k" and isinstance(i, list) else i)) for f, k, i in fs] for t, fs in d["fields"].items()}
        return s

    def head_index(self, h: str) -> int:
        return self.heads.index(h)

    @classmethod
    def learn(cls, rows: Sequence[Tuple[Table, Dict[str, Any]]]) -> "Schema":
        """From ``(table, teacher action)`` pairs: each (type, field) takes the pointer kind its
        values match most often (at least half the rows), else its few literal values (an enum),
        else the most common value (a constant)."""
        s = cls()
        by_field: Dict[Tuple[str, str], List[Tuple[Table, Any]]] = defaultdict(list)
        heads: Set[str] = set()
        conf: Dict[str, List[float]] = defaultdict(list)
        types: Set[str] = set()
        present: Dict[str, List[Set[str]]] = defaultdict(list)
        for table, a in rows:
            t, p = a["action_type"], a["payload"]
            if t != "submit_decision":
                present[t].append(set(p))
            if t == "submit_decision":
                heads.update(_submission_heads(p))
                if isinstance(p.get("confidence"), (int, float)):
                    conf[str(p.get("decision"))].append(float(p["confidence"]))
                continue
            types.add(t)
            for f, v in p.items():
                by_field[(t, f)].append((table, v))
        s.types = sorted(types)
        for t in s.types:
            s.fields[t] = []
        for (t, f), vals in sorted(by_field.items()):
            spec = _field_spec(f, vals)
            if spec[1] == "enum" and any(f not in keys for keys in present[t]):
                spec = (f, "enum", sorted(set(spec[2]) | {"null"}))  # optional: absent when "null"
            s.fields[t].append(spec)
        order = {"c": 0, "chk": 1, "ev": 2, "dup": 3, "xinv": 4, "ex": 5}
        s.heads = sorted(heads, key=lambda h: (order[h.split(":")[0]], h))
        s.confidence = {d: round(sum(v) / len(v), 3) for d, v in conf.items()}
        labels: Set[str] = set()
        for t in s.types:
            for f, kind, _info in s.fields[t]:
                if kind in ("ra", "rn", "any"):
                    for tb, v in by_field[(t, f)]:
                        tok = tb.find(kind, v)
                        if tok is not None and tok.startswith("r"):
                            labels.add(class_label(tb.ref(tok)))
        s.arg_labels = sorted(labels)
        return s


def _field_spec(f: str, vals: List[Tuple[Table, Any]]) -> Tuple[str, str, Any]:
    n = len(vals)
    scal = [(tb, v) for tb, v in vals if isinstance(v, (str, int, float)) and not isinstance(v, bool)]
    cover = {kind: [(tb, tb.find(kind, v)) for tb, v in scal] for kind in ("d", "k", "ra", "rn", "any")}
    share = {kind: sum(h is not None for _, h in hs) / max(n, 1) for kind, hs in cover.items()}
    for kind in ("d", "k", "ra", "rn"):
        if share[kind] >= 0.5 and share[kind] >= 0.9 * share["any"]:
            if kind == "k":
                return (f, "k", sorted({tb.id(h)[0] for tb, h in cover["k"] if h is not None}))
            return (f, kind, None)
    if share["any"] >= 0.5:
        return (f, "any", None)
    lits = Counter(json.dumps(v, sort_keys=True) for _, v in vals)
    if len(lits) <= 4 and all(len(x) <= 40 for x in lits):
        return (f, "enum", sorted(lits))
    return (f, "const", lits.most_common(1)[0][0])


def _submission_heads(p: Dict[str, Any]) -> List[str]:
    out = [f"c:{f}:{c}" for f in LIST_FIELDS for c in (p.get(f) or []) if isinstance(c, str)]
    out += [f"chk:{k}={v}" for k, v in (p.get("policy_checks") or {}).items() if isinstance(v, str)]
    out += [f"ev:{k}" for k in (p.get("evidence_map") or {})]
    out += [h for h, f in LINK_FIELDS.items() if p.get(f)]
    out += [f"ex:{k}" for k in (p.get("extracted_fields") or {})]
    return out


# ---------------------------------------------------------------------------- encode / expand


def encode(action: Dict[str, Any], table: Table, schema: Schema) -> Optional[List[str]]:
    """A teacher action in the compact language (``None`` when a tool argument cannot be
    expressed); submission items the table cannot point at are left out."""
    t, p = action["action_type"], action["payload"]
    if t == "submit_decision":
        return _encode_submission(p, table, schema)
    if t not in schema.fields:
        return None
    out = [t]
    for f, kind, info in schema.fields[t]:
        if kind == "const":
            continue
        v = p.get(f)
        if kind == "enum":
            lit = json.dumps(v, sort_keys=True)
            if lit not in info:
                return None
            out.append(f"{f}={lit}")
            continue
        tok = table.find(kind, v, set(info) if kind == "k" and info else None)
        if tok is None:
            return None
        out.append(tok)
    return out + [EOS]


def _encode_submission(p: Dict[str, Any], table: Table, schema: Schema) -> List[str]:
    d = p.get("decision") if p.get("decision") in DECISIONS else "NEEDS_REVIEW"
    out = ["submit", d]
    known = set(schema.heads)
    for h in [x for x in schema.heads if x in set(_submission_heads(p))]:
        kind = h.split(":")[0]
        if kind in ("c", "chk"):
            out.append(h)
        elif kind == "ev":
            tok = table.ev_pointer((p.get("evidence_map") or {}).get(h[3:]))
            if tok is not None:
                out += [h, tok]
        elif kind in LINK_FIELDS:
            for v in p.get(LINK_FIELDS[kind]) or []:
                tok = table.link_pointer(v)
                if tok is not None:
                    out += [kind, tok]
        elif kind == "ex":
            v = (p.get("extracted_fields") or {}).get(h[3:])
            tok = table.find("ra", v)
            if tok is None and _num(str(v)) is not None:
                tok = next((r for r in table.pointers("rn") if _same(table.value("rn", r), _num(str(v)))), None)
            if tok is not None:
                out += [h, tok]
    assert all(x in known or x in DECISIONS or x == "submit" or x[0] in "rkd" or x in LINK_FIELDS for x in out)
    return out[: 2 + 2 * MAX_ITEMS] + [EOS]


def expand(tokens: Sequence[str], table: Table, schema: Schema) -> Dict[str, Any]:
    """A compact action as the environment's action JSON. Raises ``ValueError`` on a sequence
    the grammar does not allow. Copies only table values and schema vocabulary."""
    toks = [x for x in tokens if x != EOS]
    if not toks:
        raise ValueError("empty action")
    if toks[0] == "submit":
        return {"action_type": "submit_decision", "payload": _expand_submission(toks, table, schema)}
    t = toks[0]
    if t not in schema.fields:
        raise ValueError(f"unknown action type {t}")
    payload: Dict[str, Any] = {}
    rest = list(toks[1:])
    for f, kind, info in schema.fields[t]:
        if kind == "const":
            payload[f] = table.native.get(t, {}).get(f, json.loads(info))
            continue
        if not rest:
            raise ValueError(f"{t}: missing {f}")
        tok = rest.pop(0)
        if kind == "enum":
            if not tok.startswith(f + "=") or tok[len(f) + 1:] not in info:
                raise ValueError(f"{t}: {tok} is not a {f}")
            lit = json.loads(tok[len(f) + 1:])
            if lit is not None:  # "null": the optional field is left out
                payload[f] = lit
        else:
            payload[f] = table.value(kind, tok)
    if rest:
        raise ValueError(f"{t}: trailing {rest}")
    return {"action_type": t, "payload": payload}


def _expand_submission(toks: List[str], table: Table, schema: Schema) -> Dict[str, Any]:
    if len(toks) < 2 or toks[1] not in DECISIONS:
        raise ValueError("submit needs a decision")
    d = toks[1]
    out: Dict[str, Any] = {"decision": d, "confidence": schema.confidence.get(d, 0.8), "reason_codes": []}
    checks: Dict[str, str] = {}
    ev: Dict[str, Any] = {}
    i = 2
    while i < len(toks):
        h = toks[i]
        kind = h.split(":")[0]
        if h not in schema.heads and h not in LINK_FIELDS:
            raise ValueError(f"unknown submission item {h}")
        if kind == "c":
            _, f, code = h.split(":", 2)
            out.setdefault(f, [])
            if code not in out[f]:
                out[f].append(code)
            i += 1
            continue
        if kind == "chk":
            name, _, state = h[4:].partition("=")
            checks[name] = state
            i += 1
            continue
        if i + 1 >= len(toks):
            raise ValueError(f"{h} needs a pointer")
        ptr = toks[i + 1]
        if kind == "ev":
            ev[h[3:]] = table.ev_value(ptr)
        elif kind in LINK_FIELDS:
            v = table.link_value(ptr)
            lst = out.setdefault(LINK_FIELDS[kind], [])
            if v not in lst:
                lst.append(v)
        elif kind == "ex":
            out.setdefault("extracted_fields", {})[h[3:]] = table.value("ra", ptr)
        i += 2
    out["policy_checks"] = checks
    out["evidence_map"] = ev
    return out


# ---------------------------------------------------------------------------- the grammar


class Context:
    """What the grammar needs besides the prefix: the table, the schema, the actions already
    played (compact, for the no-repeat rule), the native interventions and the steps left."""

    def __init__(self, table: Table, schema: Schema, played: Sequence[Sequence[str]], native_types: Set[str], steps_left: int) -> None:
        self.table, self.schema, self.native_types, self.steps_left = table, schema, native_types, steps_left
        self.played = {tuple(a) for a in played}
        self._ptr_cache: Dict[Tuple[str, Any], List[str]] = {}

    def ptrs(self, kind: str, info: Any) -> List[str]:
        key = (kind, json.dumps(sorted(info)) if isinstance(info, (set, list)) else None)
        if key not in self._ptr_cache:
            self._ptr_cache[key] = self.table.pointers(kind, set(info) if kind == "k" and info else None)
        return self._ptr_cache[key]

    def field_options(self, t: str, i: int) -> List[str]:
        f, kind, info = [x for x in self.schema.fields[t] if x[1] != "const"][i]
        if kind == "enum":
            return [f"{f}={lit}" for lit in info]
        return self.ptrs(kind, info)

    def n_fields(self, t: str) -> int:
        return len([x for x in self.schema.fields[t] if x[1] != "const"])

    def open_completions(self, prefix: Sequence[str]) -> bool:
        """Whether some completion of a tool-action prefix has not been played yet."""
        t = prefix[0]
        n = self.n_fields(t)
        total = 1
        for i in range(len(prefix) - 1, n):
            total *= len(self.field_options(t, i))
        done = sum(1 for a in self.played if len(a) == n + 2 and a[:len(prefix)] == tuple(prefix))
        return total > done

    def type_legal(self, t: str) -> bool:
        if t.startswith(INTERVENTION) and t not in self.native_types:
            return False
        n = self.n_fields(t)
        return all(self.field_options(t, i) for i in range(n)) and self.open_completions([t])


def allowed(prefix: Sequence[str], ctx: Context) -> List[str]:
    """The tokens the grammar allows after ``prefix`` (never empty)."""
    s = ctx.schema
    if not prefix:
        if ctx.steps_left <= 1:
            return ["submit"]
        return [t for t in s.types if ctx.type_legal(t)] + ["submit"]
    if prefix[0] == "submit":
        return _allowed_submission(list(prefix), ctx)
    t = prefix[0]
    n = ctx.n_fields(t)
    i = len(prefix) - 1
    if i >= n:
        return [EOS]
    opts = ctx.field_options(t, i)
    # no exact repeat of a played action: an argument is offered while one of its completions is new
    return [o for o in opts if ctx.open_completions(list(prefix) + [o])] or opts


def _allowed_submission(prefix: List[str], ctx: Context) -> List[str]:
    s = ctx.schema
    if len(prefix) == 1:
        return list(DECISIONS)
    last = prefix[-1]
    head = last.split(":")[0]
    if last in s.heads or last in LINK_FIELDS:
        if head == "ev":
            return ctx.table.ev_pointers() or [EOS]
        if head in LINK_FIELDS:
            return (ctx.table.pointers("k") + ctx.table.pointers("d")) or [EOS]
        if head == "ex":
            return ctx.table.pointers("r") or [EOS]
    if len(prefix) >= 2 + 2 * MAX_ITEMS:
        return [EOS]
    heads = [x for x in prefix[2:] if x in s.heads or x in LINK_FIELDS]
    lo = max((s.head_index(h) for h in heads if h in s.heads), default=-1)
    used = set(heads)
    opts = [h for j, h in enumerate(s.heads) if j > lo or (h in LINK_FIELDS and j >= lo and h in used)]
    # pointer-taking heads whose pointer set is empty are not offered
    opts = [h for h in opts if not (h.startswith("ev") and not ctx.table.ev_pointers()) and not (h.startswith("ex") and not ctx.table.refs)
            and not (h in LINK_FIELDS and not (ctx.table.ids or ctx.table.docs))]
    return opts + [EOS]


# ---------------------------------------------------------------------------- the token layer
#
# The grammar and the expansion work on *units* (a pointer is one unit, ``r7``); the language model
# reads and writes *tokens*, where a pointer is its descriptor and ordinal (``lab:po n:0``), so that
# "the PO line" is the same token in every case and no copying by position has to be learned.

PTR = re.compile(r"^[dkr]\d+$")
DESC_PREFIXES = ("dt:", "key:", "lab:")


def to_tokens(units: Sequence[str], table: Table) -> List[str]:
    out: List[str] = []
    for u in units:
        if PTR.match(u):
            d, n = table.desc[u]
            out += [d, f"n:{n}"]
        else:
            out.append(u)
    return out


def to_units(tokens: Sequence[str], table: Table) -> List[str]:
    out: List[str] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.startswith(DESC_PREFIXES):
            if i + 1 >= len(tokens) or not tokens[i + 1].startswith("n:"):
                raise ValueError(f"pointer {t} needs an ordinal")
            unit = table.resolve.get((t, int(tokens[i + 1][2:])))
            if unit is None:
                raise ValueError(f"no {t} {tokens[i + 1]} in this state")
            out.append(unit)
            i += 2
        else:
            out.append(t)
            i += 1
    return out


def allowed_tokens(prefix: Sequence[str], ctx: Context) -> List[str]:
    """The tokens the grammar allows after a token prefix (pointers as descriptor, ordinal)."""
    if prefix and prefix[-1].startswith(DESC_PREFIXES):
        units = allowed(to_units(prefix[:-1], ctx.table), ctx)
        return [f"n:{ctx.table.desc[u][1]}" for u in units if PTR.match(u) and ctx.table.desc[u][0] == prefix[-1]]
    units = allowed(to_units(prefix, ctx.table), ctx)
    return list(dict.fromkeys(ctx.table.desc[u][0] if PTR.match(u) else u for u in units))
