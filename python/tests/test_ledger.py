"""The evidence ledger (the Rust ``ls_rl::Ledger`` behind a thin Python wrapper): a step prompt
carrying it is self-sufficient (every id a teacher submission cites is in that submission's own
prompt; without it almost none is), it stays compact, its views are the Rust rows, a text that is
not a reply is refused, and the ToolEnv's ``ledger`` replies carry it."""

from __future__ import annotations

import json
import re

import pytest

from conftest import _binary
from ledgershield.native import ControlBenchEnv
from ledgershield.training.binary import episode_records, run_agent
from ledgershield import _native
from ledgershield.native import EnvError
from ledgershield.training.ledger import EvidenceLedger, cited_ids, covered, ledger_prompt, measure, replay_ledgers, reset_of
from ledgershield.trl_env import environment_factory


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list:
    db = tmp_path_factory.mktemp("ledger") / "r.db"
    summary = run_agent(str(_binary()), "teacher", db)
    return episode_records(db, summary["run_id"])


def test_teacher_submissions_are_covered_only_with_the_ledger(records: list) -> None:
    m = measure(records)
    print(json.dumps(m))
    assert m["submissions"] == len(records) and m["diverged_episodes"] == 0
    assert m["covered_with_ledger"] == 1.0
    assert m["covered_without_ledger"] < 0.2
    # Compact: the rendered ledger of a curated episode stays within a few thousand characters.
    assert m["ledger_p95"] < 8000, m


def test_cited_ids_and_the_rust_ledgers_rows() -> None:
    payload = {"evidence_map": {"total": {"doc_id": "INV-1", "page": 1, "bbox": [1, 2, 3, 4], "token_ids": ["inv1-t5"]},
                                "bank": {"vendor_key": "acme"}}, "duplicate_links": ["LED-9"]}
    assert cited_ids(payload) == {"INV-1", "inv1-t5", "acme", "LED-9"}
    env = ControlBenchEnv()
    led = EvidenceLedger()
    reset = env.reset_text(case_id="CASE-D-001")
    led.absorb(reset)
    doc = json.loads(reset)["observation"]["visible_documents"][0]["doc_id"]
    view = led.absorb(env.step_text({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "accurate"}}))
    tokens = [t["token_id"] for t in json.loads(env.step_text({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "accurate"}}))
              ["observation"]["last_tool_result"]["tokens"]]
    prompt = ledger_prompt("Case X\nReturn JSON only.", led)
    assert prompt.endswith("Return JSON only.") and "Evidence so far:" in prompt
    # The text is the Rust ledger's: one line per row with how a submission cites it.
    total = next(r for r in view.lines if r["class"] == "total")
    assert view.render() == led.render() and f"({doc} {total['cited_ids'][1]}): {total['text']}" in prompt
    line_ids = {i for r in view.lines for i in r["cited_ids"]}
    assert doc in view.cited and len(line_ids) > 5 and line_ids <= {doc, *tokens} and line_ids <= set(view.cited)
    kinds = {r["kind"] for r in view.rows}
    assert {"document", "line"} <= kinds <= set(_native.LEDGER_ROW_KINDS)
    assert all(f in _native.LEDGER_FLAGS for r in view.rows for f in r["flags"])
    assert all(r["doc_id"] == doc for r in view.lines)
    sub = {"evidence_map": {"total": {"doc_id": doc, "page": 1, "token_ids": [total["cited_ids"][1]]}}, "duplicate_links": ["LED-9"]}
    assert not covered(sub, prompt)  # LED-9 was never revealed
    sub.pop("duplicate_links")
    assert covered(sub, prompt)


def test_text_that_is_not_a_reply_is_refused_and_the_ledger_kept() -> None:
    led = EvidenceLedger()
    led.absorb(ControlBenchEnv().reset_text(case_id="CASE-D-001"))
    before = led.render()
    with pytest.raises(EnvError, match="not a ControlBench reply"):
        led.absorb('{"observation": {}}')
    with pytest.raises(EnvError):
        led.absorb("{")
    assert led.render() == before and before


def test_replay_is_the_recorded_episode(records: list) -> None:
    rec = records[0]
    steps = list(replay_ledgers(ControlBenchEnv(), reset_of(rec), rec["trajectory"]))
    assert [a["action_type"] for _, _, a in steps] == [s["action_type"] for s in rec["trajectory"]]


def test_tool_env_ledger_replies_carry_every_revealed_line() -> None:
    with environment_factory(reply_mode="ledger")() as env:
        env.reset(case_id="CASE-D-001")
        doc = env.observation.visible_documents[0].doc_id
        first = env.ocr(doc_id=doc, mode="accurate")
        later = env.lookup_policy()
        assert "Evidence so far:" in later and '"tokens"' not in first
        # The OCR lines revealed two steps ago are still in the latest reply.
        lines = [ln for ln in first.split("Evidence so far:\n", 1)[1].splitlines() if re.match(r"\[\d+\] line ", ln)]
        assert lines and all(ln in later for ln in lines)
    with pytest.raises(ValueError, match="reply_mode"):
        environment_factory(reply_mode="verbose")


def test_python_step_prompt_is_the_llm_agents(records: list) -> None:
    """The constrained evaluation's prompt equals the one ``ledgershield run`` recorded."""
    from ledgershield.training.constrained import prompt_matches

    equal, total = prompt_matches(records)
    assert total > 100 and equal == total, (equal, total)


def test_candidates_add_the_ledgers_lookups_and_targets_drop_the_certificate() -> None:
    from ledgershield.training.constrained import action_text, candidates, strip_certificate

    env = ControlBenchEnv()
    led = EvidenceLedger()
    reset = env.reset_text(case_id="CASE-D-001")
    led.absorb(reset)
    doc = json.loads(reset)["observation"]["visible_documents"][0]["doc_id"]
    view = led.absorb(env.step_text({"action_type": "ocr", "payload": {"doc_id": doc, "mode": "accurate"}}))
    native = [{"action_type": "lookup_policy", "payload": {}}]
    cands = candidates(native, view)
    texts = {action_text(c) for c in cands}
    assert len(texts) == len(cands) and cands[0] == native[0]
    assert view.ids["po_id"] and view.ids["receipt_id"]
    assert action_text({"action_type": "lookup_po", "payload": {"po_id": view.ids["po_id"][0]}}) in texts
    assert action_text({"action_type": "lookup_receipt", "payload": {"receipt_id": view.ids["receipt_id"][0]}}) in texts
    sub = {"action_type": "submit_decision", "payload": {"decision": "PAY", "decision_certificate": {"nodes": []}, "counterfactual": "x"}}
    assert strip_certificate(sub)["payload"] == {"decision": "PAY"}
