"""Playing a plan reply against a live server, for rewards and self-play scoring.

:func:`parse_actions` follows the ``llm`` agent's reading of a reply (code fences stripped, the
first JSON object, a plan ``{"actions": [...]}`` or one ``{action_type, payload}``), so a plan is
rewarded exactly as ``ledgershield run --agent llm`` would play it. Each rollout uses a new
session (a fresh institution): rewards never depend on other rollouts.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

MAX_PLAN_ACTIONS = 64
FALLBACK = {"decision": "NEEDS_REVIEW", "confidence": 0.35, "reason_codes": ["model_output_unparseable"], "policy_checks": {}, "evidence_map": {}, "notes": "plan ended before a decision"}


def parse_actions(text: str) -> Optional[List[Dict[str, Any]]]:
    t = text.strip()
    for fence in ("```json", "```"):
        if t.startswith(fence):
            t = t[len(fence):]
    if t.endswith("```"):
        t = t[:-3]
    t = t.strip()
    start = t.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(t[start:])
    except ValueError:
        return None

    def one(v: Any) -> Optional[Dict[str, Any]]:
        if not isinstance(v, dict):
            return None
        if isinstance(v.get("action"), dict):
            return one(v["action"])
        at = v.get("action_type")
        if not isinstance(at, str) or not at.strip() or len(at) > 64:
            return None
        payload = v.get("payload") if isinstance(v.get("payload"), dict) else {}
        return {"action_type": at.strip(), "payload": payload}

    if isinstance(value, dict) and isinstance(value.get("actions"), list):
        acts = [a for a in (one(x) for x in value["actions"][:MAX_PLAN_ACTIONS]) if a]
        return acts or None
    a = one(value)
    return [a] if a else None


def play_plan(url: Optional[str], case_id: str, text: str, fresh_institution: bool = False) -> Dict[str, Any]:
    """Reset ``case_id`` on a new session (a new session starts from a fresh institution;
    ``fresh_institution`` also asks the server for one explicitly), play the plan, submit the safe fallback if the plan
    ends without a decision; ``{score, parsed, submitted_by_plan, steps, result_class}``. ``url=None`` plays in
    process (a new native environment is a new session)."""
    from ..client import LedgerShieldEnv, LedgerShieldServerError
    from ..models import ControlBenchAction
    from ..native import NativeClient

    acts = parse_actions(text)
    with (NativeClient() if url is None else LedgerShieldEnv(base_url=url).sync()) as env:
        reset: Dict[str, Any] = {"case_id": case_id}
        if fresh_institution:
            reset["fresh_institution"] = True
        result = env.reset(**reset)
        steps, by_plan = 0, False
        for a in acts or []:
            if result.done:
                break
            try:
                result = env.step(ControlBenchAction(action_type=a["action_type"], payload=a["payload"]))  # type: ignore[arg-type]
                steps += 1
                by_plan = by_plan or (result.done and a["action_type"] == "submit_decision")
            except (LedgerShieldServerError, ValueError):
                continue  # a refused or invalid action, as the llm agent sees it: play on
        if not result.done:
            result = env.step(ControlBenchAction(action_type="submit_decision", payload=FALLBACK))
            steps += 1
        obs = result.observation
        return {"score": float(obs.final_score or 0.0), "parsed": acts is not None, "submitted_by_plan": by_plan,
                "steps": steps, "result_class": obs.info.get("result_class")}
