"""The TRL tool environment: tool discovery contract and whole episodes of every family."""

from __future__ import annotations

import inspect
import re
import typing

import pytest

from ledgershield import ACTION_TYPES, LedgerShieldToolEnv, environment_factory

from conftest import FAMILY_CASES


def _public_tools(cls: type) -> dict:
    return {n: m for n, m in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_") and n != "reset"}


def test_full_replies_keep_the_raw_result(server_url: str) -> None:
    with environment_factory(server_url, reply_mode="full")() as env:
        env.reset(case_id="CASE-A-001")
        out = env.ocr(doc_id=env.observation.visible_documents[0].doc_id)
        assert '"tool_name":"ocr"' in out


def _teacher_plan(server_url: str, case_id: str) -> list:
    """The teacher's actions for a case, from a fresh in-process run of the binary."""
    import json
    import subprocess
    import tempfile

    from conftest import _binary

    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([str(_binary()), "run", "--agent", "teacher", "--cases", case_id, "--format", "json", "--db", f"{d}/r.db"],
                             capture_output=True, text=True, check=True).stdout
        run_id = json.loads(out[out.index("{"):])["run_id"]
        import sqlite3

        with sqlite3.connect(f"{d}/r.db") as con:
            rec = json.loads(con.execute("SELECT record_json FROM episodes WHERE run_id=?", (run_id,)).fetchone()[0])
    return [(s["action_type"], s["payload"]) for s in rec["trajectory"]]


def _play(env, case_id: str, plan: list) -> float:
    env.reset(case_id=case_id)
    for action_type, payload in plan:
        if env.done:
            break
        try:
            env._act(action_type, payload)
        except ValueError:
            pass
    return env.get_reward()


def test_same_trajectory_same_reward_whatever_ran_before(server_url: str) -> None:
    plan = _teacher_plan(server_url, "CASE-D-001")
    others = {c: _teacher_plan(server_url, c) for c in ("CASE-D-002", "CASE-E-001")}
    with environment_factory(server_url)() as env:
        first = _play(env, "CASE-D-001", plan)
        for _ in range(2):
            for c, p in others.items():
                _play(env, c, p)
            assert _play(env, "CASE-D-001", plan) == first
    assert first > 0.5


def test_get_reward_grades_an_unsubmitted_rollout(server_url: str) -> None:
    with environment_factory(server_url)() as env:
        env.reset(case_id="CASE-B-001")
        env.lookup_policy()
        r = env.get_reward()
        assert env.done and env.final_score is not None and r == env.final_score
        assert not env.submitted_by_model
        assert env.get_reward() == r, "idempotent"
    with environment_factory(server_url, grade_unsubmitted=False)() as env:
        env.reset(case_id="CASE-B-001")
        assert env.get_reward() == 0.0 and not env.done


def test_close_is_idempotent_and_the_documented_snippet_exits(server_url: str) -> None:
    import subprocess
    import sys

    env = environment_factory(server_url)()
    env.reset(case_id="CASE-A-001")
    env._close()
    env._close()
    del env
    snippet = (
        "from ledgershield import environment_factory\n"
        f"Env = environment_factory({server_url!r})\n"
        "with Env() as env:\n"
        "    print(env.reset(case_id='CASE-D-001')[:20])\n"
        "    env.lookup_policy()\n"
        "    env.submit_decision(decision='HOLD', confidence=0.5)\n"
        "    print(env.get_reward())\n"
        "leftover = Env()\n"
        "leftover.reset(case_id='CASE-A-001')\n"
    )
    proc = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr


def test_public_methods_are_exactly_the_21_actions() -> None:
    # TRL exposes every public method but reset and get_reward as a tool.
    tools = {n for n in _public_tools(LedgerShieldToolEnv) if n != "get_reward"}
    assert sorted(tools) == sorted(ACTION_TYPES)


def test_tool_methods_are_the_action_declaration() -> None:
    # The tools are generated from action_schemas.json, which a Rust test keeps equal to the
    # declaration (ls_env::action::payload_schema): names, parameters and required-ness agree.
    from ledgershield.trl_env import SUBMISSION_TOOL_FIELDS, SUBMISSION_TOOL_REQUIRED, load_action_schemas

    actions = load_action_schemas()
    assert sorted(a["name"] for a in actions) == sorted(ACTION_TYPES)
    for a in actions:
        fn = getattr(LedgerShieldToolEnv, a["name"])
        params = inspect.signature(fn).parameters
        names = [p for p in params if p != "self"]
        props = a["schema"].get("properties") or {}
        required = set(a["schema"].get("required") or [])
        if a["kind"] == "final":
            # The submission tool shows a curated subset of the submission's fields, in order,
            # and requires at least the declared required ones.
            assert names == list(SUBMISSION_TOOL_FIELDS) and set(names) <= set(props), a["name"]
            required = set(SUBMISSION_TOOL_REQUIRED)
            assert set(a["schema"].get("required") or []) <= required
        else:
            assert sorted(names) == sorted(props), a["name"]
        doc = inspect.getdoc(fn) or ""
        assert doc.startswith(a["description"]), a["name"]
        for p in names:
            assert (params[p].default is inspect.Parameter.empty) == (p in required), (a["name"], p)
            assert f"{p}: {props[p].get('description') or p}" in doc, (a["name"], p)


def test_the_submission_tool_keeps_its_signature_and_validates() -> None:
    import json

    fn = LedgerShieldToolEnv.submit_decision
    hints = typing.get_type_hints(fn)
    assert hints["confidence"] is float and hints["policy_checks"] == typing.Optional[typing.Dict[str, str]]
    assert hints["reason_codes"] == typing.Optional[typing.List[str]]
    env = LedgerShieldToolEnv.__new__(LedgerShieldToolEnv)
    env._act = lambda action_type, payload, by_model=True: json.dumps([action_type, payload])  # type: ignore[method-assign]
    action, payload = json.loads(env.submit_decision("HOLD", 0.5, reason_codes=["x"], notes="n"))
    assert action == "submit_decision"
    assert payload["decision"] == "HOLD" and payload["confidence"] == 0.5
    assert payload["reason_codes"] == ["x"] and payload["notes"] == "n"
    with pytest.raises(TypeError):
        env.submit_decision(decision="HOLD")  # confidence is required by the tool
    with pytest.raises(TypeError):
        env.submit_decision(decision="HOLD", confidence=0.5, risk_score=0.1)  # not shown by the tool
    with pytest.raises(ValueError, match="invalid submission"):
        env.submit_decision(decision="HOLD", confidence=0.5, policy_checks={"three_way_match": "ok"})


def test_generated_tools_send_the_arguments_given() -> None:
    import json

    env = LedgerShieldToolEnv.__new__(LedgerShieldToolEnv)
    env._act = lambda action_type, payload, by_model=True: json.dumps([action_type, payload])  # type: ignore[method-assign]
    assert json.loads(env.zoom("D-1", bbox=[0, 0, 10, 10])) == ["zoom", {"doc_id": "D-1", "bbox": [0, 0, 10, 10]}]
    assert json.loads(env.ocr("D-1", "accurate")) == ["ocr", {"doc_id": "D-1", "mode": "accurate"}]
    assert json.loads(env.lookup_policy()) == ["lookup_policy", {}]
    assert json.loads(env.request_callback_verification()) == ["request_callback_verification", {}]
    with pytest.raises(TypeError):
        env.lookup_po()  # po_id is required by the declaration
    with pytest.raises(TypeError):
        env.lookup_vendor(vendor_key="v", not_declared=1)


@pytest.mark.parametrize("name", sorted(ACTION_TYPES))
def test_tool_docstrings_describe_every_argument(name: str) -> None:
    fn = getattr(LedgerShieldToolEnv, name)
    doc = inspect.getdoc(fn)
    assert doc and doc.splitlines()[0].strip(), f"{name} needs a description"
    hints = typing.get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    if params:
        assert "Args:" in doc, f"{name} needs an Args section"
        args_block = doc.split("Args:", 1)[1].split("Returns:", 1)[0]
        for p in params:
            assert p in hints, f"{name}.{p} needs a type hint"
            assert re.search(rf"^\s*{p}:\s*\S", args_block, re.M), f"{name}: Args lacks {p}"
    assert hints.get("return") is str


def test_transformers_schema_when_available() -> None:
    utils = pytest.importorskip("transformers.utils")
    for name in ACTION_TYPES:
        schema = utils.get_json_schema(getattr(LedgerShieldToolEnv(), name))
        assert schema["function"]["name"] == name


@pytest.mark.parametrize("family", sorted(FAMILY_CASES))
def test_tool_env_episode(server_url: str, family: str) -> None:
    Env = environment_factory(server_url)
    with Env() as env:
        prompt = env.reset(case_id=FAMILY_CASES[family], prompt=[{"role": "user", "content": "ignored column"}])
        assert FAMILY_CASES[family] in prompt and "submit_decision" in prompt
        assert env.reward == 0.0 and not env.done
        doc = env.observation.visible_documents[0].doc_id
        out = env.ocr(doc_id=doc)
        assert '"tokens":[' in out and '"control_boundary"' not in out  # compact reply
        env.lookup_policy()
        env.request_callback_verification()
        assert env.reward == 0.0
        out = env.submit_decision(decision="NEEDS_REVIEW", confidence=0.6, reason_codes=[], evidence_map={})
        assert env.done and '"episode_over":true' in out
        assert env.final_score is not None and 0.0 <= env.final_score <= 1.0
        assert env.reward == env.final_score
        with pytest.raises(ValueError, match="episode is over"):
            env.lookup_policy()
        # A new episode resets the reward.
        env.reset(seed=11)
        assert env.reward == 0.0 and not env.done


def test_tool_errors_are_value_errors(server_url: str) -> None:
    with environment_factory(server_url)() as env:
        env.reset(case_id="CASE-B-002")
        with pytest.raises(ValueError, match="invalid submission"):
            env.submit_decision(decision="MAYBE", confidence=0.5)
        with pytest.raises(ValueError):
            env.submit_decision(decision="PAY", confidence=3.0)
        assert not env.done
        # A well-formed but useless call is a normal (penalised) step, not an error.
        out = env.lookup_vendor(vendor_key="no-such-vendor")
        assert '"success":false' in out


def test_compact_replies_fit_half_the_teacher_episodes_in_4096_tokens(server_url: str, tmp_path) -> None:
    """Teacher episodes of every curated case replayed through the ToolEnv: in compact mode at
    least half fit 4,096 tokens of tool output (counted as 3 characters per token, below the
    3.1-3.5 a byte-level BPE gets on this JSON), and the rewards are the teacher's."""
    from ledgershield.training.binary import episode_records, run_agent

    from conftest import _binary

    summary = run_agent(str(_binary()), "teacher", tmp_path / "r.db")
    records = episode_records(tmp_path / "r.db", summary["run_id"])
    sizes = {}
    for mode in ("full", "compact"):
        chars = []
        with environment_factory(server_url, reply_mode=mode)() as env:
            for rec in records:
                out = [env.reset(case_id=rec["case_id"])]
                for s in rec["trajectory"]:
                    if env.done:
                        break
                    try:
                        out.append(env._act(s["action_type"], s["payload"]))
                    except ValueError as e:
                        out.append(str(e))
                assert abs(env.get_reward() - rec["final_score"]) < 1e-9, rec["case_id"]
                chars.append(len("".join(out)))
        sizes[mode] = sorted(chars)
    fits = sum(c <= 4096 * 3 for c in sizes["compact"])
    assert fits * 2 >= len(records), sizes
    assert sizes["compact"][len(records) // 2] * 2 < sizes["full"][len(records) // 2]


def test_every_reset_is_a_fresh_institution_without_an_operator_key(server_url: str) -> None:
    """The server refuses a keyless ``fresh_institution`` (the governed agent cannot lift its own
    governance); the TRL environment then opens a new session per reset, so each rollout still
    starts from a fresh institution."""
    import requests

    r = requests.post(f"{server_url}/reset", json={"case_id": "CASE-A-001", "fresh_institution": True},
                      headers={"X-Session-Id": "trl-fresh-probe"}, timeout=30)
    assert r.status_code == 403 and "fresh_institution" in r.json()["error"]["message"]
    with environment_factory(server_url)() as env:
        for _ in range(3):
            env.reset(case_id="CASE-A-001")
            assert env.observation.institutional_memory.get("case_counter") == 0
            env._act("submit_decision", {"decision": "PAY", "confidence": 0.9})
            assert env.done
