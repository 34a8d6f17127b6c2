"""``LedgerShieldEnv`` (typed EnvClient) and the submission helpers against the real server."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from ledgershield import (
    ACTION_TYPES,
    ControlBenchAction,
    ControlBenchObservation,
    ControlBenchState,
    LedgerShieldEnv,
    LedgerShieldServerError,
    Submission,
    submit_decision_action,
    submit_decision_payload,
)

from conftest import FAMILY_CASES


def test_action_names_match_server_schema(server_url: str) -> None:
    import requests

    schema = requests.get(f"{server_url}/schema", timeout=10).json()["action"]
    assert schema["$defs"]["ActionName"]["enum"] == list(ACTION_TYPES)


@pytest.mark.parametrize("family", sorted(FAMILY_CASES))
def test_typed_sync_episode(server_url: str, family: str) -> None:
    with LedgerShieldEnv(base_url=server_url).sync() as env:
        result = env.reset(case_id=FAMILY_CASES[family])
        obs = result.observation
        assert isinstance(obs, ControlBenchObservation)
        assert obs.case_id == FAMILY_CASES[family] and obs.step_count == 0 and not obs.done
        assert obs.final_score is None
        doc = obs.visible_documents[0].doc_id
        result = env.step(ControlBenchAction(action_type="ocr", payload={"doc_id": doc}))
        assert result.observation.step_count == 1
        assert result.observation.last_tool_result["tool_name"] == "ocr"
        result = env.act("lookup_policy")
        assert result.observation.step_count == 2
        result = env.step(submit_decision_action("HOLD", confidence=0.5, reason_codes=["three_way_match_pending"]))
        assert result.done and result.observation.terminated and not result.observation.truncated
        score = result.observation.final_score
        assert score is not None and 0.0 <= score <= 1.0
        state = env.state()
        assert isinstance(state, ControlBenchState)
        assert state.submitted and state.done and state.final_score == pytest.approx(score, abs=1e-4)


def test_typed_async_episode(server_url: str) -> None:
    async def play() -> ControlBenchState:
        async with LedgerShieldEnv(base_url=server_url) as env:
            result = await env.reset(case_id="CASE-E-002")
            while not result.done:
                # Spend steps until the step limit truncates the episode.
                result = await env.act("lookup_policy")
            assert result.observation.truncated and not result.observation.terminated
            return await env.state()

    state = asyncio.run(play())
    assert state.done and not state.submitted
    assert state.terminal_reason in ("max_steps_reached", "budget_exhausted")


def test_server_errors_are_typed(server_url: str) -> None:
    with LedgerShieldEnv(base_url=server_url).sync() as env:
        with pytest.raises(LedgerShieldServerError) as e:
            env.act("ocr", doc_id="X")
        assert e.value.code == "EXECUTION_ERROR" and e.value.error == "reset_required"
        with pytest.raises(LedgerShieldServerError) as e:
            env.reset(case_id="CASE-Z-999")
        assert e.value.code == "VALIDATION_ERROR"
        # The session is still usable after errors.
        assert env.reset(case_id="CASE-A-003").observation.case_id == "CASE-A-003"
        with pytest.raises(LedgerShieldServerError) as e:
            env.step({"action_type": "zoom", "payload": {"doc_id": {"bad": 1}}})
        assert e.value.code == "VALIDATION_ERROR"


def test_client_side_validation() -> None:
    with pytest.raises(ValidationError):
        ControlBenchAction(action_type="teleport", payload={})
    with pytest.raises(ValidationError):
        submit_decision_payload("MAYBE")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        submit_decision_payload("PAY", confidence=1.5)
    with pytest.raises(ValidationError):
        submit_decision_payload("HOLD", policy_checks={"three_way_match": "ok"})
    with pytest.raises(ValidationError):
        submit_decision_payload("HOLD", reason_codes=["x"] * 300)
    payload = submit_decision_payload(
        "ESCALATE_FRAUD",
        confidence=0.9,
        fraud_flags=["bank_override_attempt"],
        policy_checks={"bank_change_verification": "fail"},
        evidence_map={"bank_override_attempt": {"doc_id": "EMAIL-1", "page": 1, "bbox": [0, 0, 10, 10], "token_ids": ["t1"]}},
    )
    assert payload["decision"] == "ESCALATE_FRAUD"
    assert "discrepancies" not in payload and "notes" not in payload
    assert Submission(decision="PAY").to_action().action_type == "submit_decision"
