"""A structured (non-LLM) policy trained by behaviour cloning on teacher episodes, played in
process through the native environment, with the evidence ledger as its episode memory.

It is a set of linear models over hashed sparse features (numpy only, no torch):

* **action-type head**: a softmax over the action types, from the episode state (task family,
  observed signals, the ledger's values, counts of the actions played so far, step fraction);
  a type is legal only while it has an argument combination not yet played;
* **pointer heads** for arguments: for every (action type, field) a linear scorer over the
  ledger's slot values (ids by key, OCR lines by label, document and position, the numbers they
  print, the visible documents by type); the argument is the best-scoring slot value. A
  combination already played is skipped;
* **submission heads**: the decision (softmax), each reason code / fraud flag / discrepancy /
  campaign signal (logistic), each policy check (absent / pass / fail), each evidence-map claim
  (logistic include, then a pointer over the ledger's citable references), the duplicate and
  cross-invoice links (logistic over the ledger's ids) and Task A's extracted fields (a pointer
  over OCR lines; the value is the text after the line's ``label:``). No certificate, no
  counterfactual, no line items (the environment grades their absence).

Everything the policy reads comes from observations (the ledger and the step envelope), never
the case or its gold. The teacher's episodes are replayed in process
(:func:`ledgershield.training.ledger.replay_ledgers`), so a training row is exactly what the
policy sees when it plays.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter, defaultdict
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .ledger import EvidenceLedger, replay_ledgers

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


def state_features(obs: Dict[str, Any], led: EvidenceLedger, played: Sequence[Dict[str, Any]]) -> List[str]:
    """Named features of the current state (hashed later)."""
    f = ["bias", f"task:{obs.get('task_type')}"]
    f += [f"sig:{s}" for s in led.signals]
    f += [f"val:{k}={v}" for k, v in led.values.items() if len(v) <= 12]
    f += [f"has:{k}" for k in led.values]
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


def slot_values(obs: Dict[str, Any], led: EvidenceLedger) -> List[Tuple[Any, List[str]]]:
    """Every value an argument may point at, with its named features."""
    out: List[Tuple[Any, List[str]]] = []
    for d in obs.get("visible_documents") or []:
        out.append((d["doc_id"], ["src:doc", f"dt:{d.get('doc_type')}"]))
    for k, vals in led.ids.items():
        for i, v in enumerate(vals):
            out.append((v, ["src:id", f"key:{k}", f"key:{k}:{min(i, 3)}"]))
    for (doc, _page), lines in led.ocr.items():
        dtype = _doc_type(obs, doc)
        for tid, (text, box) in lines.items():
            label, _, rest = text.partition(": ")
            base = [f"dt:{dtype}", f"y:{_y(box)}"] + [f"w:{w}" for w in _words(label, 4)]
            if rest:
                out.append((rest.strip().rstrip("~"), ["src:after", f"lab:{label.lower()[:24]}"] + base))
                n = _num(rest)
                if n is not None:
                    out.append((n, ["src:num", f"lab:{label.lower()[:24]}"] + base))
            else:
                out.append((text.rstrip("~"), ["src:line", "nolabel"] + base))
    return out


def _doc_type(obs: Dict[str, Any], doc: str) -> str:
    for d in obs.get("visible_documents") or []:
        if d["doc_id"] == doc:
            return str(d.get("doc_type"))
    return "other"


def _y(box: str) -> int:
    try:
        return min(int(float(box.split(",")[1]) // 100), 9)
    except (IndexError, ValueError):
        return 0


def ref_candidates(obs: Dict[str, Any], led: EvidenceLedger) -> List[Tuple[Dict[str, Any], List[str]]]:
    """The ledger's citable references (an evidence-map value), with their named features."""
    out: List[Tuple[Dict[str, Any], List[str]]] = []
    for r in led.refs:
        if r["kind"] == "ocr":
            label = r["text"].partition(": ")[0] if ": " in r["text"] else ""
            feats = ["ref:ocr", f"dt:{_doc_type(obs, r['doc_id'])}", f"lab:{label.lower()[:24]}", f"y:{_y(','.join(str(x) for x in r['bbox']))}"]
            feats += [f"w:{w}" for w in _words(r["text"])]
            out.append(({"doc_id": r["doc_id"], "page": r["page"], "bbox": r["bbox"], "token_ids": r["token_ids"]}, feats))
        elif r["key"] in ("vendor_key", "po_id", "receipt_id", "ledger_id", "thread_id", "change_id"):
            out.append(({r["key"]: r["value"]}, ["ref:id", f"key:{r['key']}", f"tool:{r.get('tool')}"]))
    return out


def link_candidates(led: EvidenceLedger, obs: Dict[str, Any]) -> List[Tuple[str, List[str]]]:
    out = [(v, ["link:id", f"key:{k}"]) for k, vals in led.ids.items() for v in vals]
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

    def legal(self, t: str, obs: Dict[str, Any], led: EvidenceLedger, played_keys: set, native_types: set) -> bool:
        if t == "submit_decision":
            return True
        spec = self.fields.get(t, {})
        if not any("pointer" in f for f in spec.values()):
            if t.startswith(("request_", "route_", "freeze_", "flag_", "create_")) and t not in native_types:
                return False
            return _key({"action_type": t, "payload": self._payload(t, obs, led, played_keys) or {}}) not in played_keys
        return self._payload(t, obs, led, played_keys) is not None

    def _payload(self, t: str, obs: Dict[str, Any], led: EvidenceLedger, played_keys: set) -> Optional[Dict[str, Any]]:
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

    def act(self, obs: Dict[str, Any], led: EvidenceLedger, played: List[Dict[str, Any]], native: List[Dict[str, Any]]) -> Dict[str, Any]:
        steps_left = int(obs.get("max_steps") or 0) - int(obs.get("step_count") or 0)
        if steps_left <= 1 or not self.types:
            return {"action_type": "submit_decision", "payload": self.submission(obs, led, played)}
        played_keys = {_key(a) for a in played}
        native_types = {c["action_type"] for c in native}
        x = _vec(state_features(obs, led, played), "type|")
        s = Rows([x]).scores(self.type_w)[0]
        for i in np.argsort(-s, kind="stable"):
            t = self.types[int(i)]
            if not self.legal(t, obs, led, played_keys, native_types):
                continue
            if t == "submit_decision":
                return {"action_type": t, "payload": self.submission(obs, led, played)}
            return {"action_type": t, "payload": self._payload(t, obs, led, played_keys) or {}}
        return {"action_type": "submit_decision", "payload": self.submission(obs, led, played)}

    def submission(self, obs: Dict[str, Any], led: EvidenceLedger, played: List[Dict[str, Any]]) -> Dict[str, Any]:
        x = _vec(state_features(obs, led, played), "sub|")
        X = Rows([x])
        decision = DECISIONS[int(np.argmax(X.scores(self.decision_w)[0]))]
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

    def _evidence(self, obs: Dict[str, Any], led: EvidenceLedger, X: Rows) -> Dict[str, Any]:
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

    def _extract(self, obs: Dict[str, Any], led: EvidenceLedger) -> Dict[str, Any]:
        slots = [(v, f) for v, f in slot_values(obs, led) if "src:after" in f or "src:line" in f]
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
    from ..native import ControlBenchEnv, EnvError

    steps: List[Dict[str, Any]] = []
    subs: List[Dict[str, Any]] = []
    for rec in records:
        traj = rec.get("trajectory") or []
        if not traj or traj[-1].get("action_type") != "submit_decision":
            continue
        env = ControlBenchEnv()
        played: List[Dict[str, Any]] = []
        try:
            for envelope, led, a in replay_ledgers(env, rec["case_id"], traj):
                obs = envelope["observation"]
                act = {"action_type": a["action_type"], "payload": a["payload"]}
                feats = state_features(obs, led, played)
                if act["action_type"] == "submit_decision":
                    subs.append({"feats": feats, "payload": act["payload"], "refs": ref_candidates(obs, led),
                                 "links": link_candidates(led, obs), "slots": slot_values(obs, led), "task": obs.get("task_type")})
                steps.append({"feats": feats, "type": act["action_type"], "payload": act["payload"], "slots": slot_values(obs, led)})
                played.append(act)
        except EnvError:
            continue  # a case this process's pool does not hold
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
            slots = [(sv, sf) for sv, sf in s["slots"] if "src:after" in sf or "src:line" in sf]
            pos = [i for i, (sv, _) in enumerate(slots) if isinstance(v, str) and (_same(sv, v) or _same(_num(str(sv)), _num(v)) and _num(v) is not None)]
            if pos:
                groups.append(([_vec(sf, f"ex.{field}|") for _, sf in slots], pos))
        if groups:
            pol.extract_ptr[field], pol.losses[f"ex:{field}"] = fit_pointer(groups, lr, epochs)


# ---------------------------------------------------------------------------- playing


def play_episode(pol: StructuredPolicy, case_id: str) -> Dict[str, Any]:
    """One episode in process (fresh institution): ``{case_id, task_type, final_score, ...}``."""
    from ..native import ControlBenchEnv, EnvError

    env = ControlBenchEnv()
    envelope = env.reset(case_id=case_id, fresh_institution=True)
    led = EvidenceLedger()
    led.observe(envelope["observation"])
    played: List[Dict[str, Any]] = []
    refused = 0
    while not envelope.get("done"):
        obs = envelope["observation"]
        a = pol.act(obs, led, played, env.candidates())
        try:
            envelope = env.step(a)
        except EnvError:
            refused += 1
            a = {"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": []}}
            envelope = env.step(a)
        played.append(a)
        led.observe(envelope["observation"])
    info = envelope.get("info") or {}
    return {"case_id": case_id, "task_type": envelope["observation"].get("task_type"), "final_score": float(info.get("final_score") or 0.0),
            "result_class": info.get("result_class"), "steps": len(played), "refused": refused,
            "unsafe_release": bool(info.get("unsafe_release")), "decision": played[-1]["payload"].get("decision") if played else None}
