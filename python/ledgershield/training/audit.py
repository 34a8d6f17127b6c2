"""Financial Audit: a findings parser, GRPO over train seeds × the 4 tasks, and held-out
evaluation (per-task F1 and recall) beside the server's rule-based baseline.

The model sees the task description, the valid error types and the documents (JSON, cut to
``DOC_CHARS``) and answers with findings. :func:`parse_findings` reads JSON first (a list, or
``{"findings": [...]}``) and salvages free text (``DOC-ID ... error_type`` on one line, only
known error types). Every rollout is graded on a new session: ``reset(task, seed)``, one step with
the findings and ``submit_final``; the reward is the grader's partial-credit F1.
"""

from __future__ import annotations


import csv
import json
import math
import re
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional
from .progress import enabled as progress_enabled

TASKS = ["expense_audit", "invoice_match", "gst_reconciliation", "fraud_detection"]
DOC_CHARS = 6000
MAX_FINDINGS = 50


# In-process sessions (``url=None``): one native environment per session name.
_NATIVE: Dict[str, Any] = {}


def _native_post(path: str, body: Dict[str, Any], session: Optional[str]) -> Dict[str, Any]:
    from ..native import AuditEnv

    env = _NATIVE.setdefault(session or "default", AuditEnv())
    if path == "/reset":
        return env.reset(**body)
    if path == "/step":
        return env.step(body)
    raise ValueError(f"{path} needs a server: pass --url")


def _post(url: Optional[str], path: str, body: Dict[str, Any], session: Optional[str] = None) -> Dict[str, Any]:
    """A reset or step against the server at ``url``, or in process when ``url`` is None."""
    if url is None:
        return _native_post(path, body, session)
    headers = {"Content-Type": "application/json"}
    if session:
        headers["X-Session-Id"] = session
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _get(url: str, path: str, session: str) -> Dict[str, Any]:
    from .binary import operator_key

    headers = {"X-Session-Id": session}
    key = operator_key(url)
    if key:
        headers["X-API-Key"] = key  # a sealed held-out grade is read by the evaluator (operator) only
    req = urllib.request.Request(f"{url}{path}", headers=headers, method="GET")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def valid_types(obs: Dict[str, Any]) -> List[str]:
    """The observation's valid error types (listed in its ``metadata``)."""
    return list(obs.get("valid_error_types") or obs.get("metadata", {}).get("valid_error_types", []))


def prompt_for(obs: Dict[str, Any]) -> str:
    docs = json.dumps(obs.get("documents", {}), separators=(",", ":"))
    if len(docs) > DOC_CHARS:
        docs = docs[:DOC_CHARS] + "...(truncated)"
    return (f"{obs['task_description']}\nValid error types: {', '.join(valid_types(obs))}.\nDocuments: {docs}\n"
            'Answer with JSON only: {"findings": [{"document_id": "...", "error_type": "...", "description": "..."}]}')


def parse_findings(text: str, valid_types: Iterable[str]) -> Dict[str, Any]:
    """``{"findings": [...], "mode": "json" | "salvaged" | "none"}``."""
    valid = {t.lower() for t in valid_types}

    def clean(items: Any) -> List[Dict[str, Any]]:
        out = []
        for f in items if isinstance(items, list) else []:
            if isinstance(f, dict) and isinstance(f.get("document_id"), str) and isinstance(f.get("error_type"), str):
                out.append({"document_id": f["document_id"][:64], "error_type": f["error_type"].lower()[:64],
                            "description": str(f.get("description") or "Finding")[:300]})
        return out[:MAX_FINDINGS]

    for start in [m.start() for m in re.finditer(r"[\[{]", text)][:20]:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            continue
        found = clean(value.get("findings") if isinstance(value, dict) else value)
        if found:
            return {"findings": found, "mode": "json"}
    salvaged, seen = [], set()
    for line in text.splitlines():
        ids = re.findall(r"\b[A-Z][A-Z0-9]{1,9}(?:-[A-Z0-9]+)+\b", line)
        types = [t for t in re.findall(r"[a-z][a-z0-9_]+", line.lower()) if t in valid]
        if ids and types and (ids[0], types[0]) not in seen:
            seen.add((ids[0], types[0]))
            salvaged.append({"document_id": ids[0], "error_type": types[0], "description": line.strip()[:300]})
    return {"findings": salvaged[:MAX_FINDINGS], "mode": "salvaged" if salvaged else "none"}


def grade(url: Optional[str], task: str, seed: int, text: str) -> Dict[str, Any]:
    """Reset ``task``/``seed`` on a new session, submit the parsed findings, return the grade."""
    session = f"train-{uuid.uuid4().hex}"
    obs = _post(url, "/reset", {"task_id": task, "seed": seed}, session)["observation"]
    parsed = parse_findings(text, valid_types(obs))
    res = _post(url, "/step", {"action": {"findings": parsed["findings"], "submit_final": True}}, session)
    _NATIVE.pop(session, None)
    g = res.get("grader") or {}
    if not g and res.get("info", {}).get("grade_sealed") and url is not None:
        g = _get(url, "/grader", session)  # held-out seed: the evaluator reads the sealed grade
    return {"task": task, "seed": seed, "score": float(g.get("partial_credit_f1", g.get("score", 0.0))), "recall": float(g.get("recall", 0.0)),
            "strict_f1": float(g.get("strict_f1", 0.0)), "parse_mode": parsed["mode"], "findings": len(parsed["findings"])}


def rows_for(url: Optional[str], seeds: Iterable[int]) -> List[Dict[str, Any]]:
    rows = []
    for seed in seeds:
        for task in TASKS:
            session = f"prompt-{uuid.uuid4().hex}"
            obs = _post(url, "/reset", {"task_id": task, "seed": seed}, session)["observation"]
            _NATIVE.pop(session, None)
            rows.append({"prompt": [{"role": "user", "content": prompt_for(obs)}], "task_id": task, "seed": seed})
    return rows


def audit_grpo(model: str, url: Optional[str], out: Path, seeds: Iterable[int] = range(42, 52), max_steps: int = 4, num_generations: int = 2,
               batch_size: int = 2, max_completion_length: int = 256, lr: float = 1e-5, threads: int = 2, seed: int = 0) -> Dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    graded: List[Dict[str, Any]] = []

    def reward(prompts: List[Any], completions: List[Any], task_id: List[str], seed: List[int], **kw: Any) -> List[float]:
        scores = []
        for c, t, s in zip(completions, task_id, seed):
            g = grade(url, t, int(s), c[-1]["content"] if isinstance(c, list) else str(c))
            graded.append(g)
            scores.append(g["score"])
        return scores

    data = Dataset.from_list(rows_for(url, seeds))
    cfg = GRPOConfig(output_dir=str(out / "trainer"), max_steps=max_steps, learning_rate=lr, per_device_train_batch_size=batch_size,
                     num_generations=num_generations, max_completion_length=max_completion_length, logging_steps=1,
                     save_strategy="no", report_to=[], seed=seed, use_cpu=not torch.cuda.is_available(),
                     bf16=torch.cuda.is_available(), disable_tqdm=not progress_enabled(), beta=0.0)
    tok = AutoTokenizer.from_pretrained(model)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model), reward_funcs=reward, args=cfg, train_dataset=data, processing_class=tok)
    trainer.train()
    trainer.model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    summary = {"train_prompts": len(data), "steps": trainer.state.global_step, "rollouts_graded": len(graded),
               "mean_reward": (sum(g["score"] for g in graded) / len(graded)) if graded else None,
               "all_finite": all(math.isfinite(g["score"]) for g in graded), "model_dir": str(out / "model")}
    (out / "audit_grpo_summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def audit_eval(model: str, url: str, out: Path, seeds: Iterable[int] = range(100, 105), max_new_tokens: int = 512, threads: int = 2) -> Dict[str, Any]:
    import torch

    from .modelserver import load_policy

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(seeds)
    policy = load_policy(model, max_new_tokens=max_new_tokens)
    results = [dict(grade(url, r["task_id"], r["seed"], policy.reply(r["prompt"], max_new_tokens, 0.0))) for r in rows_for(url, seeds)]
    base = _post(url, "/baseline", {"seeds": seeds})["scores"]["tasks"]
    per_task = []
    for t in TASKS:
        rs = [r for r in results if r["task"] == t]
        per_task.append({"task": t, "model_f1": round(sum(r["score"] for r in rs) / len(rs), 4), "model_recall": round(sum(r["recall"] for r in rs) / len(rs), 4),
                         "parsed_json": sum(r["parse_mode"] == "json" for r in rs), "salvaged": sum(r["parse_mode"] == "salvaged" for r in rs),
                         "baseline_f1": base[t]["mean_score"]})
    with open(out / "audit_eval.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(per_task[0]))
        w.writeheader()
        w.writerows(per_task)
    summary = {"model": model, "seeds": seeds, "per_task": per_task, "episodes": results}
    (out / "audit_eval.json").write_text(json.dumps(summary, indent=1))
    return summary
