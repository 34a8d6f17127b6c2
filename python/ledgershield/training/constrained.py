"""Candidate-constrained decoding for language-model checkpoints, played in process.

At every step the model does not generate free text: it scores each **legal candidate action**
of the observation and plays the most likely one, so every step parses by construction ("parse
success under constraint" is the share of steps the environment accepted). The candidates are
the native environment's (``ControlBenchEnv.candidates()``: OCR of every document, email
threads, the policy, the available interventions, a submission per decision) plus the lookups the
evidence ledger makes possible (``lookup_vendor``/``lookup_vendor_history`` for each vendor key
revealed, ``lookup_po``/``lookup_receipt`` for each PO / receipt id a line or a record shows,
``compare_bank_account`` for each revealed vendor key and bank account). A candidate's score is the mean log-probability of its
action text (the training targets' form: compact sorted ASCII JSON) after the chat-formatted prompt.

The prompt is the ``llm`` agent's step prompt (:func:`step_prompt`, a port of
``ls_agents::llm::step_prompt``, byte-equal on the recorded teacher prompts: tested), followed by
the evidence ledger when ``with_ledger`` (:func:`.ledger.ledger_prompt`: the Rust ledger's text,
inserted as the Rust agent's ``--llm-ledger`` inserts it). :func:`ledger_rows` writes SFT rows in
that protocol from replayed teacher episodes, with the certificate and the counterfactual dropped
from the targets (the environment grades their absence).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any, Dict, Iterable, List, Tuple

from .ledger import EvidenceLedger, LedgerView, ledger_prompt, loads, replay_ledgers, reset_of

MAX_RESULT_CHARS = 3000
MAX_HISTORY = 24
CERTIFICATE_KEYS = ("decision_certificate", "counterfactual")


def _rust_json(v: Any) -> str:
    """Compact JSON as serde_json writes it (numbers as parsed: ``Decimal`` keeps ``15000.00``)."""
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _rust_json(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_rust_json(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def step_prompt(obs: Dict[str, Any], history: List[str]) -> str:
    """The ``llm`` agent's user message for one observation (the default, unassisted protocol: no planner hint)."""
    result = _rust_json(obs.get("last_tool_result"))
    if len(result) > MAX_RESULT_CHARS:
        result = result[:MAX_RESULT_CHARS] + "\u2026"
    docs = ", ".join(f"{d['doc_id']} ({d['doc_type']})" for d in obs.get("visible_documents") or [])
    arts = " | ".join(f"{a['artifact_id']}: {a['summary']}" for a in obs.get("revealed_artifacts") or [])
    signals = ", ".join((obs.get("risk_snapshot") or {}).get("observed_signals") or [])
    s = (f"Case {obs['case_id']} ({obs['task_type']}), step {obs['step_count']}/{obs['max_steps']}, budget {float(obs['budget_remaining']):.2f}.\n"
         f"Instruction: {obs['instruction']}\nDocuments: {docs}\nObserved signals: {signals}\n"
         f"Pending artifacts: {len(obs.get('pending_events') or [])}\nDelivered artifacts: {arts}\n"
         f"Previous actions: {'; '.join(history[:MAX_HISTORY])}\nLast result: {result}\n")
    if int(obs["max_steps"]) - int(obs["step_count"]) <= 1:
        s += "This is your last step: submit_decision now.\n"
    return s + "Return JSON only."


def action_text(action: Dict[str, Any]) -> str:
    """A training target / candidate text: compact, sorted, ASCII JSON (the Rust ``action_target``)."""
    return json.dumps({"action_type": action["action_type"], "payload": action["payload"]}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def strip_certificate(action: Dict[str, Any]) -> Dict[str, Any]:
    if action["action_type"] != "submit_decision":
        return action
    return {"action_type": action["action_type"], "payload": {k: v for k, v in action["payload"].items() if k not in CERTIFICATE_KEYS}}


def candidates(native: List[Dict[str, Any]], led: LedgerView) -> List[Dict[str, Any]]:
    """The native candidates plus the ledger's lookups (each once, in a stable order)."""
    out = list(native)
    ids = led.ids
    vendors = ids.get("vendor_key", [])
    accounts = ids.get("bank_account", [])
    for v in vendors:
        out.append({"action_type": "lookup_vendor", "payload": {"vendor_key": v}})
        out.append({"action_type": "lookup_vendor_history", "payload": {"vendor_key": v}})
        out += [{"action_type": "compare_bank_account", "payload": {"vendor_key": v, "proposed_bank_account": a}} for a in dict.fromkeys(accounts)]
    out += [{"action_type": "lookup_po", "payload": {"po_id": p}} for p in ids.get("po_id", [])]
    out += [{"action_type": "lookup_receipt", "payload": {"receipt_id": r}} for r in ids.get("receipt_id", [])]
    seen, uniq = set(), []
    for c in out:
        k = action_text(c)
        if k not in seen:
            seen.add(k)
            uniq.append(c)
    return uniq


class CandidateScorer:
    """Mean log-probability of each candidate's text after the prompt, under a causal LM."""

    def __init__(self, model: Any, tok: Any, system: str, max_prompt_tokens: int = 3072) -> None:
        self.model, self.tok, self.system, self.max_prompt_tokens = model, tok, system, max_prompt_tokens

    def choose(self, prompt: str, cands: List[Dict[str, Any]]) -> int:
        import torch

        msgs = [{"role": "system", "content": self.system}, {"role": "user", "content": prompt}]
        head = self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        p_ids = self.tok(head, add_special_tokens=False)["input_ids"][-self.max_prompt_tokens:]
        c_ids = [self.tok(action_text(c), add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id] for c in cands]
        self.model.eval()
        with torch.no_grad():
            # The prompt once; then every candidate's continuation in one batch over the repeated
            # prompt cache, right-padded (causal attention: real tokens never see the padding).
            out = self.model(torch.tensor([p_ids]), use_cache=True)
            first = torch.log_softmax(out.logits[0, -1].float(), -1)
            width = max(len(ids) for ids in c_ids) - 1
            scores = [float(first[ids[0]]) for ids in c_ids]
            if width > 0:
                past = out.past_key_values
                past.batch_repeat_interleave(len(c_ids))
                pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else 0
                batch = torch.tensor([ids[:-1] + [pad] * (width - len(ids) + 1) for ids in c_ids])
                logp = torch.log_softmax(self.model(batch, past_key_values=past, use_cache=True).logits.float(), -1)
                for i, ids in enumerate(c_ids):
                    n = len(ids) - 1
                    if n:
                        scores[i] += float(logp[i, torch.arange(n), torch.tensor(ids[1:])].sum())
            scores = [sc / len(ids) for sc, ids in zip(scores, c_ids)]
        return max(range(len(cands)), key=lambda i: scores[i])


def play_lm_episode(scorer: CandidateScorer, ep: Dict[str, Any], with_ledger: bool = True) -> Dict[str, Any]:
    """One episode (:mod:`.tasks`) under candidate-constrained decoding."""
    from ..native import ControlBenchEnv, EnvError
    from .tasks import finish

    env = ControlBenchEnv()
    text = env.reset_text(**ep["reset"])
    envelope = loads(text)
    led = EvidenceLedger()
    led.absorb(text)
    history: List[str] = []
    steps = refused = 0
    while not envelope.get("done"):
        obs = envelope["observation"]
        prompt = step_prompt(obs, history)
        if with_ledger:
            prompt = ledger_prompt(prompt, led.view)
        cands = candidates(env.candidates(), led.view)
        a = cands[scorer.choose(prompt, cands)]
        try:
            text = env.step_text(a)
        except EnvError:
            refused += 1
            text = env.step_text({"action_type": "submit_decision", "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": []}})
        envelope = loads(text)
        steps += 1
        history.append(a["action_type"])
        led.absorb(text)
    return finish(ep, env, envelope, steps, {"refused": refused})


def evaluate_lm(model_dir: str, label: str, cases: List[Dict[str, Any]], system: str, with_ledger: bool = True) -> Dict[str, Any]:
    """A checkpoint under candidate-constrained decoding on ``cases`` (test episodes of the
    task distribution), summarised like the structured policies."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .structured import summarize

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    sc = CandidateScorer(model, tok, system)
    eps = [play_lm_episode(sc, c, with_ledger) for c in cases]
    steps = sum(e["steps"] for e in eps)
    return summarize(label, eps, round(1 - sum(e["refused"] for e in eps) / max(steps, 1), 4))


def ledger_rows(records: Iterable[Dict[str, Any]], out: Path, system: str, tokenizer: Any = None) -> Dict[str, Any]:
    """SFT rows (``[system, user = step prompt + ledger] -> assistant = action``, certificate
    dropped) from replayed teacher episodes (``{"reset", "trajectory"}``); returns their count
    and target / prompt lengths."""
    from ..native import ControlBenchEnv

    rows = 0
    target_len: List[int] = []
    prompt_len: List[int] = []
    with open(out, "w") as f:
        for rec in records:
            traj = rec.get("trajectory") or []
            if not traj or traj[-1].get("action_type") != "submit_decision":
                continue
            history: List[str] = []
            for envelope, led, a in replay_ledgers(ControlBenchEnv(), rec["reset"], traj):
                prompt = ledger_prompt(step_prompt(envelope["observation"], history), led)
                target = action_text(strip_certificate(a))
                f.write(json.dumps({"prompt": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                                    "completion": [{"role": "assistant", "content": target}],
                                    "metadata": {"case_id": envelope["observation"]["case_id"], "reset": rec["reset"],
                                                 "action_type": a["action_type"]}}) + "\n")
                rows += 1
                n = (lambda t: len(tokenizer(t)["input_ids"])) if tokenizer is not None else len
                target_len.append(n(target))
                prompt_len.append(n(prompt))
                history.append(a["action_type"])
    target_len.sort()
    prompt_len.sort()
    pick = (lambda xs, q: xs[min(len(xs) - 1, int(q * (len(xs) - 1)))] if xs else 0)
    return {"rows": rows, "unit": "tokens" if tokenizer is not None else "chars", "target_max": target_len[-1] if target_len else 0,
            "target_median": pick(target_len, 0.5), "target_p95": pick(target_len, 0.95),
            "prompt_median": pick(prompt_len, 0.5), "prompt_p95": pick(prompt_len, 0.95), "prompt_max": prompt_len[-1] if prompt_len else 0}


def system_prompt(steps_file: Path) -> str:
    """The system message of the exported step rows (the ``llm`` agent's)."""
    with open(steps_file) as f:
        return json.loads(f.readline())["prompt"][0]["content"]


def prompt_matches(records: Iterable[Dict[str, Any]]) -> Tuple[int, int]:
    """(equal, total): recorded teacher step prompts reproduced byte for byte by :func:`step_prompt`."""
    from ..native import ControlBenchEnv, EnvError

    eq = tot = 0
    for rec in records:
        history: List[str] = []
        try:
            for envelope, _led, a in replay_ledgers(ControlBenchEnv(), reset_of(rec), rec.get("trajectory") or []):
                tot += 1
                eq += step_prompt(envelope["observation"], history) == a.get("prompt")
                history.append(a["action_type"])
        except EnvError:
            continue
    return eq, tot
