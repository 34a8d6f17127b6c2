"""Whole episodes of every task family through openenv-core's generic client over WebSocket."""

from __future__ import annotations

import asyncio
import json

import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect

from conftest import FAMILY_CASES, scripted_actions


@pytest.mark.parametrize("family", sorted(FAMILY_CASES))
def test_generic_client_plays_family(server_url: str, family: str) -> None:
    case_id = FAMILY_CASES[family]
    with GenericEnvClient(base_url=server_url).sync() as env:
        result = env.reset(case_id=case_id)
        assert result.done is False
        assert result.observation["case_id"] == case_id
        assert result.observation["task_type"] == f"task_{family.lower()}"
        for i, action in enumerate(scripted_actions(result.observation), start=1):
            result = env.step(action)
            assert result.observation["step_count"] == i
            assert isinstance(result.reward, float)
        assert result.done is True
        state = env.state()
        assert state["case_id"] == case_id
        assert state["submitted"] is True
        assert state["done"] is True
        assert 0.0 <= state["final_score"] <= 1.0
        # A step after the end is a protocol error, not a crash.
        with pytest.raises(RuntimeError, match="EXECUTION_ERROR"):
            env.step({"action_type": "lookup_policy", "payload": {}})


def test_generic_client_async_and_reproducible(server_url: str) -> None:
    async def play() -> float:
        async with GenericEnvClient(base_url=server_url) as env:
            result = await env.reset(case_id="CASE-D-002")
            for action in scripted_actions(result.observation):
                result = await env.step(action)
            assert result.done
            return (await env.state())["final_score"]

    async def both() -> list[float]:
        return await asyncio.gather(play(), play())

    a, b = asyncio.run(both())
    assert a == b, "two concurrent sessions playing the same script get the same grade"


def test_malformed_messages_keep_the_connection_usable(server_url: str) -> None:
    ws_url = server_url.replace("http://", "ws://") + "/ws"
    with connect(ws_url) as ws:
        def ask(raw: str) -> dict:
            ws.send(raw)
            return json.loads(ws.recv(timeout=10))

        assert ask("not json")["data"]["code"] == "INVALID_JSON"
        assert ask(json.dumps({"type": "warp"}))["data"]["code"] == "UNKNOWN_TYPE"
        assert ask(json.dumps({"type": "step"}))["data"]["code"] == "VALIDATION_ERROR"
        big = json.dumps({"type": "reset", "data": {"pad": "x" * (2 * 1024 * 1024)}})
        reply = ask(big)
        assert reply["data"]["code"] == "VALIDATION_ERROR" and reply["data"]["error"] == "payload_too_large"
        reply = ask(json.dumps({"type": "reset", "data": {"case_id": "CASE-C-002"}}))
        assert reply["type"] == "observation"
        assert reply["data"]["observation"]["case_id"] == "CASE-C-002"
