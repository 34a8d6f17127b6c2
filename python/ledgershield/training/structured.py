"""A structured (non-LLM) policy trained by behaviour cloning on teacher episodes, played in
process through the native environment, with the evidence ledger as its episode memory.

It is a set of linear models over hashed sparse features (numpy only, no torch):

* **action-type head**: a softmax over the action types, from the episode state (task family,
  observed signals, the ledger's facts (its rows' relations), counts of the actions played so
  far, step fraction);
  a type is legal only while it has an argument combination not yet played;
* **pointer heads** for arguments: for every (action type, field) a linear scorer over the
  ledger's slot values (ids by key, OCR lines by the field the ledger reads them as, their
  relations, document and position, the numbers they print, the visible documents by type); the
  argument is the best-scoring slot value. A
  combination already played is skipped;
* **submission heads**: the decision (softmax), each reason code / fraud flag / discrepancy /
  campaign signal (logistic), each policy check (absent / pass / fail), each evidence-map claim
  (logistic include, then a pointer over the ledger's citable references), the duplicate and
  cross-invoice links (logistic over the ledger's ids) and Task A's extracted fields (a pointer
  over OCR lines; the value is the text after the line's ``label:``). No certificate, no
  counterfactual, no line items (the environment grades their absence).

Everything the policy reads comes from observations (the Rust evidence ledger's rows and the step
envelope), never the case or its gold. The teacher's episodes (training draws of the task
distribution, :mod:`.tasks`) are replayed in process
(:func:`ledgershield.training.ledger.replay_ledgers`), so a training row is exactly what the
policy sees when it plays; the epoch count is chosen on the validation episodes and every policy
is reported on the test episodes.
"""

from __future__ import annotations


import json
import re
import zlib
from collections import Counter, defaultdict
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import tasks
from .ledger import EvidenceLedger, LedgerView, replay_ledgers
from .progress import bar

DIM = 1 << 14
DECISIONS = ["PAY", "HOLD", "NEEDS_REVIEW", "ESCALATE_FRAUD"]
LIST_FIELDS = ("reason_codes", "fraud_flags", "discrepancies", "campaign_signals")
LINK_FIELDS = ("duplicate_links", "cross_invoice_links")
CHECK_STATES = ["absent", "pass", "fail"]
NUM = re.compile(r"-?\d[\d,]*\.?\d*")


def _h(name: str) -> int:
    return zlib.crc32(name.encode()) % DIM


def _words(text: str, limit: int = 12) -> List[str]:
    return [w for w in re.findall(r"[a-z]{3,}", text.lower())][:limit]


def _num(text: str) -> Optional[float]:
    m = NUM.search(text.replace(",", ""))
    if not m:
        return None
    try:
        return float(m.group(0).replace(",", ""))
    except ValueError:
        return None


# ---------------------------------------------------------------------------- observation features


def state_features(obs: Dict[str, Any], led: LedgerView, played: Sequence[Dict[str, Any]]) -> List[str]:
    """Named features of the current state (hashed later)."""
    f = ["bias", f"task:{obs.get('task_type')}"]
    f += [f"sig:{s}" for s in led.signals]
    f += [f"fact:{x}" for x in led.facts]
    f += [f"id:{k}" for k in led.ids]
    counts = Counter(a["action_type"] for a in played)
    for t, n in counts.items():
        f.append(f"did:{t}")
        f.append(f"did:{t}:{min(n, 4)}")
    if played:
        f.append(f"last:{played[-1]['action_type']}")
    docs = obs.get("visible_documents") or []
    ocr_done = {a["payload"].get("doc_id") for a in played if a["action_type"] == "ocr"}
    f.append(f"unread:{min(sum(1 for d in docs if d['doc_id'] not in ocr_done), 4)}")
    emails = [d["doc_id"] for d in docs if d.get("doc_type") == "email"]
    inspected = {a["payload"].get("thread_id") for a in played if a["action_type"] == "inspect_email_thread"}
    f.append(f"uninspected:{min(sum(1 for e in emails if e not in inspected), 4)}")
    f.append(f"docs:{min(len(docs), 8)}")
    f.append(f"pending:{min(len(obs.get('pending_events') or []), 3)}")
    ms = max(int(obs.get("max_steps") or 1), 1)
    f.append(f"stepfrac:{int(10 * int(obs.get('step_count') or 0) / ms)}")
    f += [f"art:{a.get('artifact_type') or a.get('artifact_id', '')[:12]}" for a in obs.get("revealed_artifacts") or []]
    return f


def _line_features(obs: Dict[str, Any], r: Dict[str, Any]) -> List[str]:
    """A ledger line's named features: its document type, height on the page, the field the
    ledger reads it as, its relations and its label's words."""
    label = str(r["text"]).partition(": ")[0] if ": " in str(r["text"]) else ""
    return ([f"dt:{_doc_type(obs, str(r.get('doc_id')))}", f"y:{_y((r.get('reference') or {}).get('bbox'))}", f"lab:{r['class']}"]
            + [f"fl:{x}" for x in r.get("flags") or []] + [f"w:{w}" for w in _words(label, 4)])


def slot_values(obs: Dict[str, Any], led: LedgerView) -> List[Tuple[Any, List[str]]]:
    """Every value an argument may point at, with its named features."""
    out: List[Tuple[Any, List[str]]] = []
    for d in obs.get("visible_documents") or []:
        out.append((d["doc_id"], ["src:doc", f"dt:{d.get('doc_type')}"]))
    seen: Counter = Counter()
    for k, v in led.id_pairs():
        out.append((v, ["src:id", f"key:{k}", f"key:{k}:{min(seen[k], 3)}"]))
        seen[k] += 1
    for r in led.lines:
        base = _line_features(obs, r)
        value = str(r.get("value") or r["text"]).strip()
        out.append((value, ["src:line"] + base))
        n = _num(value)
        if n is not None:
            out.append((n, ["src:num"] + base))
    return out


def _doc_type(obs: Dict[str, Any], doc: str) -> str:
    for d in obs.get("visible_documents") or []:
        if d["doc_id"] == doc:
            return str(d.get("doc_type"))
    return "other"


def _y(box: Any) -> int:
    try:
        return min(int(float(box[1]) // 100), 9)
    except (IndexError, TypeError, ValueError):
        return 0


REF_KEYS = ("vendor_key", "po_id", "receipt_id", "ledger_id", "thread_id", "change_id")


def ref_candidates(obs: Dict[str, Any], led: LedgerView) -> List[Tuple[Dict[str, Any], List[str]]]:
    """The ledger's citable references (an evidence-map value), with their named features."""
    out: List[Tuple[Dict[str, Any], List[str]]] = []
    for r in led.lines:
        ref = r.get("reference") or {}
        feats = ["ref:ocr"] + _line_features(obs, r) + [f"w:{w}" for w in _words(str(r["text"]))]
        out.append(({"doc_id": ref.get("doc_id"), "page": ref.get("page"), "bbox": ref.get("bbox"), "token_ids": ref.get("token_ids")}, feats))
    for k, v in led.id_pairs():
        if k in REF_KEYS:
            out.append(({k: v}, ["ref:id", f"key:{k}"]))
    return out


def link_candidates(led: LedgerView, obs: Dict[str, Any]) -> List[Tuple[str, List[str]]]:
    out = [(v, ["link:id", f"key:{k}"]) for k, v in led.id_pairs()]
    out += [(d["doc_id"], ["link:doc", f"dt:{d.get('doc_type')}"]) for d in obs.get("visible_documents") or []]
    return out


# ---------------------------------------------------------------------------- linear models


def _vec(names: Iterable[str], prefix: str = "") -> np.ndarray:
    return np.unique(np.array([_h(prefix + n) for n in names] or [_h(prefix + "bias")], dtype=np.int64))


class Rows:
    """Sparse binary rows (hashed feature indices) as flat column indices and row starts."""

    def __init__(self, rows: List[np.ndarray]) -> None:
        self.n = len(rows)
        self.cols = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        lens = np.array([len(r) for r in rows], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(lens)[:-1]]) if rows else np.zeros(0, dtype=np.int64)
        self.row_of = np.repeat(np.arange(self.n), lens)

    def scores(self, w: np.ndarray) -> np.ndarray:
        """``(n, classes)``: each row's score under every class."""
        if self.n == 0:
            return np.zeros((0, w.shape[0]), dtype=np.float32)
        return np.add.reduceat(w[:, self.cols], self.starts, axis=1).T

    def grad(self, d: np.ndarray, classes: int) -> np.ndarray:
        """``X^T d`` for ``d`` of shape ``(n, classes)``, as a ``(classes, DIM)`` array."""
        g = np.zeros((DIM, classes), dtype=np.float32)
        np.add.at(g, self.cols, d[self.row_of])
        return g.T


def _adam_fit(w: np.ndarray, grad_fn: Any, lr: float, epochs: int, l2: float = 1e-4) -> List[float]:
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    losses = []
    for t in range(1, epochs + 1):
        loss, g = grad_fn(w)
        g += l2 * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        losses.append(float(loss))
    return losses


def fit_softmax(rows: List[np.ndarray], ys: List[int], classes: int, lr: float, epochs: int,
                masks: Optional[np.ndarray] = None) -> Tuple[np.ndarray, List[float]]:
    """Multinomial logistic regression; ``masks`` (n, classes) restrict each row's classes."""
    X = Rows(rows)
    y = np.array(ys, dtype=np.int64)
    w = np.zeros((classes, DIM), dtype=np.float32)
    n = max(X.n, 1)

    def grad(w: np.ndarray) -> Tuple[float, np.ndarray]:
        s = X.scores(w)
        if masks is not None:
            s = np.where(masks, s, -1e9)
        s = s - s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        loss = -np.log(np.maximum(p[np.arange(X.n), y], 1e-12)).mean()
        p[np.arange(X.n), y] -= 1.0
        return float(loss), X.grad(p / n, classes)

    return w, _adam_fit(w, grad, lr, epochs)


def fit_logistic(rows: List[np.ndarray], Y: np.ndarray, lr: float, epochs: int) -> Tuple[np.ndarray, List[float]]:
    """Independent logistic outputs (``Y``: n x K of 0/1) over the same rows."""
    X = Rows(rows)
    k = Y.shape[1]
    w = np.zeros((k, DIM), dtype=np.float32)
    n = max(X.n, 1)

    def grad(w: np.ndarray) -> Tuple[float, np.ndarray]:
        z = np.clip(X.scores(w), -30, 30)
        p = 1.0 / (1.0 + np.exp(-z))
        loss = -(Y * np.log(np.maximum(p, 1e-12)) + (1 - Y) * np.log(np.maximum(1 - p, 1e-12))).mean()
        return float(loss), X.grad((p - Y) / n, k)

    return w, _adam_fit(w, grad, lr, epochs)


def fit_pointer(groups: List[Tuple[List[np.ndarray], List[int]]], lr: float, epochs: int) -> Tuple[np.ndarray, List[float]]:
    """One scorer over candidate rows; each group's loss is ``-log sum p(positives)``."""
    rows = [r for g, _ in groups for r in g]
    X = Rows(rows)
    gid = np.repeat(np.arange(len(groups)), [len(g) for g, _ in groups])
    pos = np.zeros(X.n, dtype=bool)
    off = 0
    for g, ps in groups:
        pos[[off + i for i in ps]] = True
        off += len(g)
    w = np.zeros((1, DIM), dtype=np.float32)
    n = max(len(groups), 1)
    G = len(groups)

    def grad(w: np.ndarray) -> Tuple[float, np.ndarray]:
        s = X.scores(w)[:, 0]
        mx = np.full(G, -np.inf)
        np.maximum.at(mx, gid, s)
        e = np.exp(s - mx[gid])
        tot = np.bincount(gid, e, minlength=G)
        p = e / tot[gid]
        pp = np.bincount(gid, p * pos, minlength=G)
        loss = -np.log(np.maximum(pp, 1e-12)).mean()
        d = p - np.where(pos, p / np.maximum(pp[gid], 1e-12), 0.0)
        return float(loss), X.grad((d / n)[:, None].astype(np.float32), 1)

    return w, _adam_fit(w, grad, lr, epochs)


# ---------------------------------------------------------------------------- the policy


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and not isinstance(a, bool) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return abs(float(a) - float(b)) < 1e-6
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return False


def _same_ref(a: Dict[str, Any], b: Any) -> bool:
    if not isinstance(b, dict):
        return False
    if "token_ids" in a:
        return sorted(a["token_ids"]) == sorted(b.get("token_ids") or [])
    return all(_same(v, b.get(k)) for k, v in a.items())


def _key(action: Dict[str, Any]) -> str:
    return json.dumps([action["action_type"], action["payload"]], sort_keys=True, default=str)


class StructuredPolicy:
    """Behaviour-cloned structured policy (see the module documentation)."""

    def __init__(self) -> None:
        self.types: List[str] = []
        self.type_w = np.zeros((0, DIM), dtype=np.float32)
        self.fields: Dict[str, Dict[str, Any]] = {}  # type -> field -> {"pointer": w} | {"const": v}
        self.decision_w = np.zeros((len(DECISIONS), DIM), dtype=np.float32)
        self.confidence: Dict[str, float] = {}
        self.codes: List[Tuple[str, str]] = []  # (field, code)
        self.codes_w = np.zeros((0, DIM), dtype=np.float32)
        self.checks: List[str] = []
        self.checks_w: Dict[str, np.ndarray] = {}
        self.claims: List[str] = []
        self.claims_w = np.zeros((0, DIM), dtype=np.float32)
        self.claim_ptr: Dict[str, np.ndarray] = {}
        self.extract_ptr: Dict[str, np.ndarray] = {}
        self.link_w: Dict[str, np.ndarray] = {}
        self.losses: Dict[str, List[float]] = {}

    # -------------------------------------------------------------- acting

    def legal(self, t: str, obs: Dict[str, Any], led: LedgerView, played_keys: set, native_types: set) -> bool:
        if t == "submit_decision":
            return True
        spec = self.fields.get(t, {})
        if not any("pointer" in f for f in spec.values()):
            if t.startswith(("request_", "route_", "freeze_", "flag_", "create_")) and t not in native_types:
                return False
            return _key({"action_type": t, "payload": self._payload(t, obs, led, played_keys) or {}}) not in played_keys
        return self._payload(t, obs, led, played_keys) is not None

    def _payload(self, t: str, obs: Dict[str, Any], led: LedgerView, played_keys: set) -> Optional[Dict[str, Any]]:
        spec = self.fields.get(t, {})
        const = {f: s["const"] for f, s in spec.items() if "const" in s}
        ptrs = [(f, s["pointer"]) for f, s in spec.items() if "pointer" in s]
        if not ptrs:
            return const
        slots = slot_values(obs, led)
        if not slots:
            return None
        ranked = []
        for f, w in ptrs:
            rows = [_vec(feats, f"{t}.{f}|") for _, feats in slots]
            sc = Rows(rows).scores(w)[:, 0]
            order = np.argsort(-sc, kind="stable")
            ranked.append((f, [slots[i][0] for i in order[:6]]))
        first_f, first_vals = ranked[0]
        for v in first_vals:
            payload = dict(const, **{first_f: v})
            for f, vals in ranked[1:]:
                payload[f] = vals[0]
            if _key({"action_type": t, "payload": payload}) not in played_keys:
                return payload
        return None

    def act(self, obs: Dict[str, Any], led: LedgerView, played: List[Dict[str, Any]], native: List[Dict[str, Any]],
            sampler: Optional["Sampler"] = None) -> Dict[str, Any]:
        """The next action: greedy, or sampled by ``sampler`` (which records the choices for RL)."""
        steps_left = int(obs.get("max_steps") or 0) - int(obs.get("step_count") or 0)
        if steps_left <= 1 or not self.types:
            return {"action_type": "submit_decision", "payload": self.submission(obs, led, played, sampler)}
        played_keys = {_key(a) for a in played}
        native_types = {c["action_type"] for c in native}
        x = _vec(state_features(obs, led, played), "type|")
        s = Rows([x]).scores(self.type_w)[0]
        mask = np.array([self.legal(t, obs, led, played_keys, native_types) for t in self.types])
        if not mask.any():
            return {"action_type": "submit_decision", "payload": self.submission(obs, led, played, sampler)}
        i = sampler.choose("type", x, s, mask) if sampler is not None else int(np.argmax(np.where(mask, s, -np.inf)))
        t = self.types[i]
        if t == "submit_decision":
            return {"action_type": t, "payload": self.submission(obs, led, played, sampler)}
        return {"action_type": t, "payload": self._payload(t, obs, led, played_keys) or {}}

    def submission(self, obs: Dict[str, Any], led: LedgerView, played: List[Dict[str, Any]], sampler: Optional["Sampler"] = None) -> Dict[str, Any]:
        x = _vec(state_features(obs, led, played), "sub|")
        X = Rows([x])
        ds = X.scores(self.decision_w)[0]
        decision = DECISIONS[sampler.choose("decision", x, ds, np.ones(len(DECISIONS), dtype=bool)) if sampler is not None else int(np.argmax(ds))]
        out: Dict[str, Any] = {"decision": decision, "confidence": self.confidence.get(decision, 0.8)}
        for f in LIST_FIELDS:
            out[f] = []
        if len(self.codes):
            p = 1 / (1 + np.exp(-np.clip(X.scores(self.codes_w)[0], -30, 30)))
            for (f, code), pi in zip(self.codes, p):
                if pi > 0.5:
                    out[f].append(code)
        out = {k: v for k, v in out.items() if v != [] or k == "reason_codes"}
        checks = {}
        for c in self.checks:
            st = CHECK_STATES[int(np.argmax(X.scores(self.checks_w[c])[0]))]
            if st != "absent":
                checks[c] = st
        out["policy_checks"] = checks
        out["evidence_map"] = self._evidence(obs, led, X)
        for f in LINK_FIELDS:
            if f in self.link_w:
                cands = link_candidates(led, obs)
                if cands:
                    rows = [np.concatenate([_vec(feats, f"{f}|"), x]) for _, feats in cands]
                    p = 1 / (1 + np.exp(-np.clip(Rows(rows).scores(self.link_w[f])[:, 0], -30, 30)))
                    vals = sorted({v for (v, _), pi in zip(cands, p) if pi > 0.5})
                    if vals:
                        out[f] = vals
        if self.extract_ptr and obs.get("task_type") == "task_a":
            out["extracted_fields"] = self._extract(obs, led)
        return out

    def _evidence(self, obs: Dict[str, Any], led: LedgerView, X: Rows) -> Dict[str, Any]:
        refs = ref_candidates(obs, led)
        if not refs or not len(self.claims):
            return {}
        p = 1 / (1 + np.exp(-np.clip(X.scores(self.claims_w)[0], -30, 30)))
        out = {}
        for claim, pi in zip(self.claims, p):
            if pi <= 0.5 or claim not in self.claim_ptr:
                continue
            sc = Rows([_vec(feats, f"ev.{claim}|") for _, feats in refs]).scores(self.claim_ptr[claim])[:, 0]
            out[claim] = refs[int(np.argmax(sc))][0]
        return out

    def _extract(self, obs: Dict[str, Any], led: LedgerView) -> Dict[str, Any]:
        slots = [(v, f) for v, f in slot_values(obs, led) if "src:line" in f]
        out = {}
        for field, w in self.extract_ptr.items():
            if slots:
                sc = Rows([_vec(f, f"ex.{field}|") for _, f in slots]).scores(w)[:, 0]
                out[field] = slots[int(np.argmax(sc))][0]
        return out

    # -------------------------------------------------------------- persistence

    def save(self, path: Any) -> None:
        arrays = {"type_w": self.type_w, "decision_w": self.decision_w, "codes_w": self.codes_w, "claims_w": self.claims_w}
        for c, w in self.checks_w.items():
            arrays[f"check/{c}"] = w
        for c, w in self.claim_ptr.items():
            arrays[f"claim/{c}"] = w
        for c, w in self.extract_ptr.items():
            arrays[f"extract/{c}"] = w
        for c, w in self.link_w.items():
            arrays[f"link/{c}"] = w
        for t, spec in self.fields.items():
            for f, s in spec.items():
                if "pointer" in s:
                    arrays[f"ptr/{t}/{f}"] = s["pointer"]
        meta = {"types": self.types, "confidence": self.confidence, "codes": self.codes, "checks": self.checks, "claims": self.claims,
                "consts": {t: {f: s["const"] for f, s in spec.items() if "const" in s} for t, spec in self.fields.items()},
                "pointers": {t: [f for f, s in spec.items() if "pointer" in s] for t, spec in self.fields.items()}}
        np.savez_compressed(path, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path: Any) -> "StructuredPolicy":
        z = np.load(path, allow_pickle=False)
        meta = json.loads(str(z["meta"]))
        p = cls()
        p.types, p.confidence, p.checks, p.claims = meta["types"], meta["confidence"], meta["checks"], meta["claims"]
        p.codes = [tuple(c) for c in meta["codes"]]
        p.type_w, p.decision_w, p.codes_w, p.claims_w = z["type_w"], z["decision_w"], z["codes_w"], z["claims_w"]
        for k in z.files:
            kind, _, rest = k.partition("/")
            if kind == "check":
                p.checks_w[rest] = z[k]
            elif kind == "claim":
                p.claim_ptr[rest] = z[k]
            elif kind == "extract":
                p.extract_ptr[rest] = z[k]
            elif kind == "link":
                p.link_w[rest] = z[k]
        for t, consts in meta["consts"].items():
            p.fields[t] = {f: {"const": v} for f, v in consts.items()}
        for t, fs in meta["pointers"].items():
            for f in fs:
                p.fields.setdefault(t, {})[f] = {"pointer": z[f"ptr/{t}/{f}"]}
        return p


# ---------------------------------------------------------------------------- training


def replay_examples(records: List[Dict[str, Any]]) -> Dict[str, List[Any]]:
    """Replay submitted teacher episodes in process and keep, for every step, what the policy
    would see (state features, slot values, references) and what the teacher did."""
    from ..native import ControlBenchEnv

    steps: List[Dict[str, Any]] = []
    subs: List[Dict[str, Any]] = []
    for rec in records:
        traj = rec.get("trajectory") or []
        if not traj or traj[-1].get("action_type") != "submit_decision":
            continue
        played: List[Dict[str, Any]] = []
        for envelope, led, a in replay_ledgers(ControlBenchEnv(), rec["reset"], traj):
            obs = envelope["observation"]
            act = {"action_type": a["action_type"], "payload": a["payload"]}
            feats = state_features(obs, led, played)
            if act["action_type"] == "submit_decision":
                subs.append({"feats": feats, "payload": act["payload"], "refs": ref_candidates(obs, led),
                             "links": link_candidates(led, obs), "slots": slot_values(obs, led), "task": obs.get("task_type")})
            steps.append({"feats": feats, "type": act["action_type"], "payload": act["payload"], "slots": slot_values(obs, led)})
            played.append(act)
    return {"steps": steps, "subs": subs}


def train(records: List[Dict[str, Any]], lr: float = 0.05, epochs: int = 60) -> Tuple[StructuredPolicy, Dict[str, Any]]:
    """Behaviour cloning of every head on the replayed teacher episodes."""
    ex = replay_examples(records)
    steps, subs = ex["steps"], ex["subs"]
    pol = StructuredPolicy()
    _fit_arguments(pol, steps, lr, epochs)
    pol.types = sorted({s["type"] for s in steps})
    tix = {t: i for i, t in enumerate(pol.types)}
    pol.type_w, pol.losses["type"] = fit_softmax([_vec(s["feats"], "type|") for s in steps], [tix[s["type"]] for s in steps],
                                                 len(pol.types), lr, epochs)
    _fit_submission(pol, subs, lr, epochs)
    info = {"step_rows": len(steps), "submissions": len(subs), "types": len(pol.types), "codes": len(pol.codes),
            "claims": len(pol.claims), "pointer_fields": sum("pointer" in s for f in pol.fields.values() for s in f.values()),
            "loss_first": {k: round(v[0], 4) for k, v in pol.losses.items() if v},
            "loss_last": {k: round(v[-1], 4) for k, v in pol.losses.items() if v}}
    return pol, info


def _fit_arguments(pol: StructuredPolicy, steps: List[Dict[str, Any]], lr: float, epochs: int) -> None:
    by_field: Dict[Tuple[str, str], List[Dict[str, Any]]] = defaultdict(list)
    for s in steps:
        if s["type"] == "submit_decision":
            continue
        pol.fields.setdefault(s["type"], {})
        for f, v in s["payload"].items():
            by_field[(s["type"], f)].append({"value": v, "slots": s["slots"]})
    for (t, f), rows in sorted(by_field.items()):
        groups = []
        for r in rows:
            pos = [i for i, (v, _) in enumerate(r["slots"]) if _same(v, r["value"])]
            if pos:
                groups.append(([_vec(feats, f"{t}.{f}|") for _, feats in r["slots"]], pos))
        if len(groups) * 2 >= len(rows):
            w, pol.losses[f"arg:{t}.{f}"] = fit_pointer(groups, lr, epochs)
            pol.fields[t][f] = {"pointer": w}
        else:
            common = Counter(json.dumps(r["value"], sort_keys=True) for r in rows).most_common(1)[0][0]
            pol.fields[t][f] = {"const": json.loads(common)}


def _fit_submission(pol: StructuredPolicy, subs: List[Dict[str, Any]], lr: float, epochs: int) -> None:
    if not subs:
        return
    X = [_vec(s["feats"], "sub|") for s in subs]
    ys = [DECISIONS.index(s["payload"].get("decision")) if s["payload"].get("decision") in DECISIONS else 2 for s in subs]
    pol.decision_w, pol.losses["decision"] = fit_softmax(X, ys, len(DECISIONS), lr, epochs)
    conf: Dict[str, List[float]] = defaultdict(list)
    for s in subs:
        if isinstance(s["payload"].get("confidence"), (int, float)):
            conf[s["payload"].get("decision")].append(float(s["payload"]["confidence"]))
    pol.confidence = {d: round(sum(v) / len(v), 3) for d, v in conf.items()}
    pol.codes = sorted({(f, c) for s in subs for f in LIST_FIELDS for c in (s["payload"].get(f) or []) if isinstance(c, str)})
    if pol.codes:
        Y = np.array([[float(c in (s["payload"].get(f) or [])) for f, c in pol.codes] for s in subs], dtype=np.float32)
        pol.codes_w, pol.losses["codes"] = fit_logistic(X, Y, lr, epochs)
    pol.checks = sorted({c for s in subs for c in (s["payload"].get("policy_checks") or {})})
    for c in pol.checks:
        yc = [CHECK_STATES.index((s["payload"].get("policy_checks") or {}).get(c, "absent")) if (s["payload"].get("policy_checks") or {}).get(c, "absent") in CHECK_STATES else 0 for s in subs]
        pol.checks_w[c], pol.losses[f"check:{c}"] = fit_softmax(X, yc, len(CHECK_STATES), lr, epochs)
    _fit_evidence(pol, subs, X, lr, epochs)
    _fit_links_and_fields(pol, subs, X, lr, epochs)


def _fit_evidence(pol: StructuredPolicy, subs: List[Dict[str, Any]], X: List[np.ndarray], lr: float, epochs: int) -> None:
    pol.claims = sorted({k for s in subs for k in (s["payload"].get("evidence_map") or {})})
    if not pol.claims:
        return
    Y = np.array([[float(k in (s["payload"].get("evidence_map") or {})) for k in pol.claims] for s in subs], dtype=np.float32)
    pol.claims_w, pol.losses["claims"] = fit_logistic(X, Y, lr, epochs)
    for claim in pol.claims:
        groups = []
        for s in subs:
            ref = (s["payload"].get("evidence_map") or {}).get(claim)
            if not isinstance(ref, dict) or not s["refs"]:
                continue
            pos = [i for i, (r, _) in enumerate(s["refs"]) if _same_ref(r, ref)]
            if pos:
                groups.append(([_vec(feats, f"ev.{claim}|") for _, feats in s["refs"]], pos))
        if groups:
            pol.claim_ptr[claim], pol.losses[f"ev:{claim}"] = fit_pointer(groups, lr, epochs)


def _fit_links_and_fields(pol: StructuredPolicy, subs: List[Dict[str, Any]], X: List[np.ndarray], lr: float, epochs: int) -> None:
    for f in LINK_FIELDS:
        rows, ys = [], []
        for s, x in zip(subs, X):
            if f not in s["payload"]:
                continue
            gold = set(s["payload"].get(f) or [])
            for v, feats in s["links"]:
                rows.append(np.concatenate([_vec(feats, f"{f}|"), x]))
                ys.append(float(v in gold))
        if rows and any(ys):
            w, pol.losses[f"link:{f}"] = fit_logistic(rows, np.array(ys, dtype=np.float32)[:, None], lr, epochs)
            pol.link_w[f] = w
    fields = sorted({k for s in subs if s["task"] == "task_a" for k in (s["payload"].get("extracted_fields") or {})})
    for field in fields:
        groups = []
        for s in subs:
            v = (s["payload"].get("extracted_fields") or {}).get(field)
            slots = [(sv, sf) for sv, sf in s["slots"] if "src:line" in sf]
            pos = [i for i, (sv, _) in enumerate(slots) if isinstance(v, str) and (_same(sv, v) or _same(_num(str(sv)), _num(v)) and _num(v) is not None)]
            if pos:
                groups.append(([_vec(sf, f"ex.{field}|") for _, sf in slots], pos))
        if groups:
            pol.extract_ptr[field], pol.losses[f"ex:{field}"] = fit_pointer(groups, lr, epochs)


# ---------------------------------------------------------------------------- playing


def play_episode(pol: StructuredPolicy, ep: Dict[str, Any], sampler: Optional["Sampler"] = None) -> Dict[str, Any]:
    """One episode (:mod:`.tasks`) in process: its record (:func:`.tasks.finish`)."""
    from ..native import ControlBenchEnv, EnvError

    env = ControlBenchEnv()
    text = env.reset_text(**ep["reset"])
    envelope = json.loads(text)
    led = EvidenceLedger()
    led.absorb(text)
    played: List[Dict[str, Any]] = []
    refused = 0
    while not envelope.get("done"):
        obs = envelope["observation"]
        a = pol.act(obs, led.view, played, env.candidates(), sampler)
        try:
            text = env.step_text(a)
        except EnvError:
            refused += 1
            a = {"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": []}}
            text = env.step_text(a)
        envelope = json.loads(text)
        played.append(a)
        led.absorb(text)
    return tasks.finish(ep, env, envelope, len(played), {"refused": refused, "decision": played[-1]["payload"].get("decision") if played else None})


# ---------------------------------------------------------------------------- on-policy RL


class Sampler:
    """Samples the type and decision heads at ``temperature`` and records each choice."""

    def __init__(self, rng: np.random.Generator, temperature: float) -> None:
        self.rng = rng
        self.temperature = temperature
        self.trace: List[Tuple[str, np.ndarray, np.ndarray, int]] = []

    def choose(self, head: str, x: np.ndarray, scores: np.ndarray, mask: np.ndarray) -> int:
        z = np.where(mask, scores / self.temperature, -np.inf)
        p = np.exp(z - z[mask].max())
        p /= p.sum()
        i = int(self.rng.choice(len(p), p=p))
        self.trace.append((head, x, p, i))
        return i


def reinforce(pol: StructuredPolicy, cases: List[Dict[str, Any]], iterations: int = 6, group: int = 4, temperature: float = 1.5,
              lr: float = 0.5, seed: int = 0, batch: int = 8) -> Dict[str, Any]:
    """Group-relative policy gradient (GRPO's advantage, no critic) on the type and decision
    heads: for each case of a batch, ``group`` sampled rollouts, advantage = reward minus the
    group mean over the group's standard deviation; groups without reward variance give no
    gradient and are counted."""
    rng = np.random.default_rng(seed)
    history = []
    for it in bar(range(iterations), total=iterations, desc=f"structured RL seed {seed}"):
        picked = [cases[int(i)] for i in rng.choice(len(cases), size=min(batch, len(cases)), replace=False)]  # training draws
        grads = {"type": np.zeros_like(pol.type_w), "decision": np.zeros_like(pol.decision_w)}
        rewards, zero_var = [], 0
        for c in picked:
            runs = []
            for _ in range(group):
                smp = Sampler(rng, temperature)
                runs.append((play_episode(pol, c, smp)["final_score"], smp.trace))
            r = np.array([x for x, _ in runs])
            rewards.extend(r.tolist())
            if r.std() < 1e-9:
                zero_var += 1
                continue
            adv = (r - r.mean()) / (r.std() + 1e-6)
            for a, (_, trace) in zip(adv, runs):
                for head, x, p, i in trace:
                    g = -p.copy()
                    g[i] += 1.0
                    grads[head][:, x] += (a * g / (len(picked) * group))[:, None]
        pol.type_w += lr * grads["type"]
        pol.decision_w += lr * grads["decision"]
        history.append({"iteration": it + 1, "mean_reward": round(float(np.mean(rewards)), 4),
                        "reward_std": round(float(np.std(rewards)), 4), "zero_variance_groups": zero_var, "groups": len(picked)})
    return {"history": history, "temperature": temperature, "group": group, "lr": lr, "seed": seed,
            "zero_variance_share": round(sum(h["zero_variance_groups"] for h in history) / max(sum(h["groups"] for h in history), 1), 4)}


# ---------------------------------------------------------------------------- the pipeline stage


def bootstrap_ci(xs: Sequence[float], n: int = 2000, seed: int = 0) -> Tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean."""
    if not xs:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    a = np.asarray(xs, dtype=float)
    means = a[rng.integers(0, len(a), size=(n, len(a)))].mean(axis=1)
    return (round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4))


def summarize(policy: str, episodes: List[Dict[str, Any]], parse_success: Optional[float]) -> Dict[str, Any]:
    """A policy's figures on held-out episodes (:mod:`.tasks` records): the headline macro mean
    (per held-out template and per held-out generator, :func:`.tasks.report`) with its 95 %
    bootstrap interval, the per-template and per-generator tables, the plain mean with its
    interval, parse success under constraint, unsafe release, per family, per episode."""
    scores = [float(e["final_score"]) for e in episodes]
    fam: Dict[str, List[float]] = defaultdict(list)
    for e in episodes:
        fam[str(e["task_type"])].append(float(e["final_score"]))
    n = max(len(scores), 1)
    kinds = [k for k, sets in tasks.HELD_OUT.items() if any(e["set"] in sets for e in episodes)]
    kind = kinds[0] if kinds else "test"
    per_episode = {e["episode"]: {"score": round(float(e["final_score"]), 4), "set": e["set"], "template": e["template"],
                                  "generator": e["generator"], "family": e["family"]} for e in episodes}
    rep = tasks.report(episodes, kind)
    return {"policy": policy, "episodes": len(scores), "kind": kind, "macro": rep["macro"],
            "macro_ci95": tasks.macro_ci({k: v["score"] for k, v in per_episode.items()}, per_episode, kind),
            "macro_templates": rep["macro_templates"], "macro_generators": rep["macro_generators"],
            "per_template": rep["per_template"], "per_generator": rep["per_generator"],
            "per_template_episodes": rep["per_template_episodes"], "per_generator_episodes": rep["per_generator_episodes"],
            "mean_score": round(sum(scores) / n, 4), "ci95": bootstrap_ci(scores),
            "parse_success": parse_success, "unsafe_release_rate": round(sum(bool(e.get("unsafe_release")) or e.get("result_class") == "unsafe_release" for e in episodes) / n, 4),
            "pass_rate": round(sum(s >= 0.85 for s in scores) / n, 4),
            "per_family": {k: round(sum(v) / len(v), 4) for k, v in sorted(fam.items())},
            "result_class_counts": dict(Counter(str(e.get("result_class")) for e in episodes)),
            "per_case": {k: v["score"] for k, v in per_episode.items()}, "per_episode": per_episode}


def evaluate_policy(pol: StructuredPolicy, label: str, cases: List[Dict[str, Any]]) -> Dict[str, Any]:
    eps = [play_episode(pol, c) for c in cases]
    steps = sum(e["steps"] for e in eps)
    refused = sum(e["refused"] for e in eps)
    return summarize(label, eps, round(1 - refused / max(steps, 1), 4))


def baseline_rows(test: Sequence[Dict[str, Any]], baselines: Sequence[str]) -> List[Dict[str, Any]]:
    """The Rust agents (scripted baselines and the teacher) on the test episodes, in process."""
    return [summarize(b, [tasks.play_agent(b, e) for e in test], None) for b in baselines]


def structured_stage(out: Any, train_eps: List[Dict[str, Any]], validation: List[Dict[str, Any]], test: List[Dict[str, Any]],
                     lr: float = 0.05, epochs: int = 60, checkpoints: Sequence[int] = (5, 15, 30, 60), rl_seeds: int = 3,
                     rl_iterations: int = 4, rl_group: int = 4, rl_batch: int = 8, rl_temperature: float = 1.0, rl_lr: float = 0.2,
                     rl_episodes: int = 200, baselines: Sequence[str] = ("random", "naive-pay", "always-escalate", "teacher"),
                     lookup_table: bool = True) -> Dict[str, Any]:
    """Behaviour cloning on the teacher's recorded training draws (``train_eps``), the epoch count
    chosen on ``validation`` among ``checkpoints`` and ``epochs``, RL fine-tunes over ``rl_seeds``
    seeds (each on its own training draws), the scripted baselines, the teacher and the lookup
    table (:mod:`.lookup`), every policy scored on ``test``."""
    import copy
    import time
    from pathlib import Path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t_cpu, t_wall = time.process_time(), time.monotonic()
    rows, curve = [], []
    candidates: Dict[int, Tuple[StructuredPolicy, Dict[str, Any], Dict[str, Any]]] = {}
    for ep in sorted(set(checkpoints) | {epochs}):
        p_, i_ = train(train_eps, lr=lr, epochs=ep)
        m = evaluate_policy(p_, f"bc@{ep}", validation)
        curve.append({"epoch": ep, "macro": m["macro"], "mean_score": m["mean_score"], "parse_success": m["parse_success"],
                      "loss_type": i_["loss_last"].get("type"), "loss_decision": i_["loss_last"].get("decision")})
        candidates[ep] = (p_, i_, m)
    chosen = max(candidates, key=lambda e: (candidates[e][2]["macro"], -e))
    pol, info, bc_val = candidates[chosen]
    pol.save(out / "structured_policy.npz")
    bc = evaluate_policy(pol, "structured-bc", test)
    rows.append(bc)
    rl_runs = []
    for seed in range(rl_seeds):
        p2 = copy.deepcopy(pol)
        rl_eps = tasks.episodes("train", rl_episodes, tasks.RL_SEED_OFFSET + 10_000 * seed)
        h = reinforce(p2, rl_eps, iterations=rl_iterations, group=rl_group, temperature=rl_temperature, lr=rl_lr, seed=seed, batch=rl_batch)
        v = evaluate_policy(p2, f"structured-rl-s{seed} (validation)", validation)
        m = evaluate_policy(p2, f"structured-rl-s{seed}", test)
        rl_runs.append({"seed": seed, "held_out_mean": m["macro"], "validation_macro": v["macro"], "ci95": m["macro_ci95"],
                        "zero_variance_share": h["zero_variance_share"], "history": h["history"], "per_family": m["per_family"]})
        rows.append(m)
    rows += baseline_rows(test, baselines)
    if lookup_table:
        from .lookup import evaluate_lookup

        rows.append(evaluate_lookup(train_eps, test))
    _write_curves(out, curve, rl_runs)
    (out / "structured_matrix.json").write_text(json.dumps(rows, indent=1))
    rl_means = [r["held_out_mean"] for r in rl_runs]
    scripted = [r["macro"] for r in rows if r["policy"] in baselines and r["policy"] != "teacher"]
    summary = {"train_episodes": len(train_eps), "validation_episodes": len(validation), "held_out_episodes": len(test),
               "held_out_ids": [tasks.key(e) for e in test], "bc": info, "bc_epochs_chosen": chosen, "bc_validation": bc_val["macro"],
               "bc_held_out": bc["macro"], "bc_ci95": bc["macro_ci95"], "bc_parse_success_under_constraint": bc["parse_success"],
               "best_scripted": max(scripted) if scripted else None, "curve": curve,
               "rl": {"seeds": rl_seeds, "iterations": rl_iterations, "group": rl_group, "temperature": rl_temperature, "lr": rl_lr,
                      "held_out_means": rl_means, "mean": round(float(np.mean(rl_means)), 4) if rl_means else None,
                      "std": round(float(np.std(rl_means)), 4) if rl_means else None,
                      "zero_variance_share": [r["zero_variance_share"] for r in rl_runs], "runs": rl_runs},
               "matrix": [{k: v for k, v in r.items() if k not in ("per_case", "per_episode")} for r in rows],
               "cpu_s": round(time.process_time() - t_cpu, 1), "wall_s": round(time.monotonic() - t_wall, 1)}
    (out / "structured_summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _write_curves(out: Any, curve: List[Dict[str, Any]], rl_runs: List[Dict[str, Any]]) -> None:
    import csv

    with open(out / "structured_curve.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(curve[0]))
        w.writeheader()
        w.writerows(curve)
    with open(out / "structured_rl_history.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["seed", "iteration", "mean_reward", "reward_std", "zero_variance_groups", "groups"])
        w.writeheader()
        for r in rl_runs:
            for h in r["history"]:
                w.writerow(dict(h, seed=r["seed"]))
