"""The evidence ledger: a step prompt carrying it is self-sufficient (every id a teacher
submission cites is in that submission's own prompt; without it almost none is), it stays
compact, and the ToolEnv's ``ledger`` replies carry it."""

from __future__ import annotations

import json

import pytest

from conftest import _binary
from ledgershield.native import ControlBenchEnv
from ledgershield.training.binary import episode_records, run_agent
from ledgershield.training.ledger import EvidenceLedger, cited_ids, covered, ledger_prompt, measure, prompt_ids, replay_ledgers
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


def test_cited_ids_and_token_id_expansion() -> None:
    payload = {"evidence_map": {"total": {"doc_id": "INV-1", "page": 1, "bbox": [1, 2, 3, 4], "token_ids": ["inv1-t5"]},
                                "bank": {"vendor_key": "acme"}}, "duplicate_links": ["LED-9"]}
    assert cited_ids(payload) == {"INV-1", "inv1-t5", "acme", "LED-9"}
    led = EvidenceLedger()
    led.observe({"last_tool_result": {"tool_name": "ocr", "doc_id": "INV-1", "tokens": [
        {"token_id": "inv1-t5", "text": "Total: 10.00", "bbox": [1, 2, 3, 4], "page": 1},
        {"token_id": "inv1-t6", "text": "Hello team", "bbox": [1, 2, 3, 4], "page": 1}]}})
    led.observe({"last_tool_result": {"tool_name": "lookup_vendor", "vendor_key": "acme", "bank_account": "DE1"}})
    prompt = ledger_prompt("Case X\nReturn JSON only.", led)
    assert prompt.endswith("Return JSON only.") and "Evidence so far:" in prompt
    assert prompt_ids(prompt) == {"inv1-t5"}  # the greeting line is not evidence
    assert not covered(payload, prompt)  # LED-9 was never revealed
    payload.pop("duplicate_links")
    assert covered(payload, prompt)


def test_replay_is_the_recorded_episode(records: list) -> None:
    rec = records[0]
    steps = list(replay_ledgers(ControlBenchEnv(), rec["case_id"], rec["trajectory"]))
    assert [a["action_type"] for _, _, a in steps] == [s["action_type"] for s in rec["trajectory"]]


def test_tool_env_ledger_replies_carry_every_revealed_line() -> None:
    with environment_factory(reply_mode="ledger")() as env:
        env.reset(case_id="CASE-D-001")
        doc = env.observation.visible_documents[0].doc_id
        first = env.ocr(doc_id=doc, mode="accurate")
        later = env.lookup_policy()
        assert "Evidence so far:" in later and '"tokens"' not in first
        # The OCR lines revealed two steps ago are still in the latest reply.
        lines = [ln for ln in first.split("Evidence so far:\n", 1)[1].splitlines() if ln.startswith(" ")]
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

    led = EvidenceLedger()
    led.observe({"last_tool_result": {"tool_name": "lookup_vendor", "vendor_key": "acme", "bank_account": "DE1", "po_id": "PO-1"}})
    native = [{"action_type": "lookup_policy", "payload": {}}]
    cands = candidates(native, led)
    texts = {action_text(c) for c in cands}
    assert len(texts) == len(cands) and cands[0] == native[0]
    assert action_text({"action_type": "compare_bank_account", "payload": {"vendor_key": "acme", "proposed_bank_account": "DE1"}}) in texts
    assert action_text({"action_type": "lookup_po", "payload": {"po_id": "PO-1"}}) in texts
    sub = {"action_type": "submit_decision", "payload": {"decision": "PAY", "decision_certificate": {"nodes": []}, "counterfactual": "x"}}
    assert strip_certificate(sub)["payload"] == {"decision": "PAY"}
