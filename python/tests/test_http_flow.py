"""The documented HTTP flow with plain ``requests``, including its failure paths."""

from __future__ import annotations

import uuid

import pytest
import requests

from conftest import FAMILY_CASES, scripted_actions


def test_discovery(server_url: str) -> None:
    assert requests.get(f"{server_url}/health", timeout=10).json()["status"] == "ok"
    meta = requests.get(f"{server_url}/metadata", timeout=10).json()
    assert meta["name"] and meta["description"] and "submit_decision" in meta["readme_content"]
    schema = requests.get(f"{server_url}/schema", timeout=10).json()
    assert schema["action"]["required"] == ["action_type"]
    assert len(schema["action"]["$defs"]["ActionName"]["enum"]) == 21
    assert "visible_documents" in schema["observation"]["properties"]
    api = requests.get(f"{server_url}/openapi.json", timeout=10).json()
    assert {"/reset", "/step", "/state", "/ws", "/mcp"} <= set(api["paths"])


@pytest.mark.parametrize("family", sorted(FAMILY_CASES))
def test_http_episode(server_url: str, family: str) -> None:
    s = requests.Session()
    s.headers["X-Session-Id"] = f"py-{family}-{uuid.uuid4().hex[:8]}"
    r = s.post(f"{server_url}/reset", json={"case_id": FAMILY_CASES[family]}, timeout=10)
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["done"] is False
    for action in scripted_actions(env["observation"]):
        r = s.post(f"{server_url}/step", json=action, timeout=10)
        assert r.status_code == 200, r.text
        env = r.json()
    assert env["done"] and env["terminated"]
    state = s.get(f"{server_url}/state", timeout=10).json()
    assert state["final_score"] == pytest.approx(env["info"]["final_score"], abs=1e-4)
    # OpenEnv's wrapped step form is accepted; after the end it is a 409.
    r = s.post(f"{server_url}/step", json={"action": {"action_type": "lookup_policy", "payload": {}}}, timeout=10)
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "episode_ended"


def test_http_errors_are_json(server_url: str) -> None:
    sid = {"X-Session-Id": f"py-err-{uuid.uuid4().hex[:8]}"}
    r = requests.post(f"{server_url}/step", json={"action_type": "ocr", "payload": {}}, headers=sid, timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_session"
    r = requests.post(f"{server_url}/reset", data="{not json", headers={**sid, "Content-Type": "application/json"}, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = requests.post(f"{server_url}/reset", json={"case_id": "CASE-NOPE"}, headers=sid, timeout=10)
    assert r.status_code == 400
    r = requests.get(f"{server_url}/ws", timeout=10)
    assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
    r = requests.post(f"{server_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
    assert len(r.json()["result"]["tools"]) == 21
