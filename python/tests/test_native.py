"""The in-process environments (``ledgershield._native``) against the real server: the same
trajectory gives byte-identical replies, the same bad request the same refusal; determinism,
the GIL released during Rust work, panics as Python exceptions."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
import requests

from conftest import FAMILY_CASES, REPO, _binary, scripted_actions

import ledgershield
from ledgershield import _native
from ledgershield.native import AuditEnv, ControlBenchEnv, EnvError, error_parts

FLOWS = REPO / "crates" / "ls-server" / "tests" / "fixtures" / "controlbench_reference_flows.json"
AUDIT_TASKS = ["expense_audit", "invoice_match", "gst_reconciliation", "fraud_detection"]


@pytest.fixture(scope="session")
def audit_server_url() -> Iterator[str]:
    proc = subprocess.Popen([str(_binary()), "serve", "--env", "audit", "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    try:
        assert proc.stdout is not None
        m = re.search(r"listening on (http://\S+)", proc.stdout.readline())
        assert m, "audit server did not report its address"
        url = m.group(1).rstrip("/")
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _post(url: str, path: str, text: str, session: str) -> requests.Response:
    return requests.post(f"{url}{path}", data=text.encode(), timeout=30,
                         headers={"X-Session-Id": session, "Content-Type": "application/json"})


def test_the_extension_is_compiled_into_the_installed_package() -> None:
    path = Path(_native.__file__)
    assert path.suffix == ".so" and path.parent == Path(ledgershield.__file__).parent, path
    assert _native.RL_VECTOR_LEN == 37


def test_golden_flows_are_byte_identical_to_the_server(server_url: str) -> None:
    """Every recorded reference flow (resets, every tool, interventions, a certified submit,
    /state), played on the server and in process: the same bytes, reply by reply."""
    flows = json.loads(FLOWS.read_text())["flows"]
    compared = 0
    for flow in flows:
        sessions: dict = {}
        for req in flow["requests"]:
            name = req.get("session", flow.get("session", "default"))
            sid, env = sessions.setdefault(name, (f"native-{uuid.uuid4().hex}", ControlBenchEnv()))
            text = json.dumps(req.get("body", {}))
            if req["method"] == "GET" and req["path"] == "/state":
                http = requests.get(f"{server_url}/state", headers={"X-Session-Id": sid}, timeout=30)
                assert http.status_code == 200
                assert env._env.state().encode() == http.content, (flow["name"], "/state")
                compared += 1
                continue
            if req["path"] not in ("/reset", "/step"):
                continue
            http = _post(server_url, req["path"], text, sid)
            try:
                native = env._env.reset(text) if req["path"] == "/reset" else env._env.step(text)
            except EnvError as e:
                assert http.status_code == error_parts(e)["status"], (flow["name"], text)
                assert http.json()["error"]["message"] == error_parts(e)["message"]
                continue
            assert http.status_code == 200, (flow["name"], text, http.text[:200])
            assert native.encode() == http.content, (flow["name"], text)
            compared += 1
    assert compared >= 20, compared


def test_scripted_and_candidate_episodes_are_byte_identical(server_url: str) -> None:
    """Each task family: the scripted episode, then one driven by candidate indices drawn at
    random (seeded; the seed is printed), replayed on the server by the candidates' JSON."""
    seed = random.randrange(1, 100_000)
    print(f"candidate trajectory seed {seed}")
    rng = random.Random(seed)
    for family, case in FAMILY_CASES.items():
        sid, env = f"native-{uuid.uuid4().hex}", ControlBenchEnv()
        reset = json.dumps({"case_id": case})
        first = env._env.reset(reset)
        assert first.encode() == _post(server_url, "/reset", reset, sid).content, family
        for action in scripted_actions(json.loads(first)["observation"]):
            text = json.dumps(action)
            assert env._env.step(text).encode() == _post(server_url, "/step", text, sid).content, (family, text)
        first = env._env.reset(reset)
        assert first.encode() == _post(server_url, "/reset", reset, sid).content, family
        while not env.done:
            cands = env.candidates()
            i = rng.randrange(len(cands))
            native = env.step_index_text(i)
            http = _post(server_url, "/step", json.dumps(cands[i]), sid)
            assert native.encode() == http.content, (family, seed, cands[i])


def test_audit_replies_are_byte_identical_to_the_server(audit_server_url: str) -> None:
    for task in AUDIT_TASKS:
        sid = f"native-{uuid.uuid4().hex[:12]}"
        env = AuditEnv()
        reset = json.dumps({"task_id": task, "seed": 42, "episode_id": f"ep-{task}", "session_id": sid})
        native = env._env.reset(reset)
        http = _post(audit_server_url, "/reset", reset, sid)
        assert http.status_code == 200 and native.encode() == http.content, task
        cands = env.candidates()
        for action in cands[1:4] + cands[:1]:
            body = dict(action, session_id=sid)
            text = json.dumps(body)
            native = env._env.step(text)
            http = _post(audit_server_url, "/step", text, sid)
            assert http.status_code == 200 and native.encode() == http.content, (task, text)
        assert env.done


def _server_error(resp: requests.Response) -> tuple:
    body = resp.json()
    return resp.status_code, body["error"]["code"], body["error"]["message"]


def _native_error(fn, *args) -> tuple:
    with pytest.raises(EnvError) as e:
        fn(*args)
    p = error_parts(e.value)
    assert isinstance(e.value, ValueError)
    return p["status"], p["code"], p["message"]


BAD_STEPS = [
    '{"action_type": "ocr", "payload": {"doc_id": [1]}}',
    '{"action_type": "submit_decision", "payload": {"decision": "PAY", "confidence": 3}}',
    '{"payload": {}}',
    '{"action_type": 7, "payload": {}}',
    '{"action_type": "ocr", "payload": [1]}',
    '{"action_type": "ocr", "payload": {}, "extra": 1}',
    '{"action": 3}',
    '[1, 2]',
    '{"action_type": "ocr", "payload": {',
]
BAD_RESETS = [
    '{"case_id": "CASE-NOPE-404"}',
    '{"seed": "seven"}',
    '{"seed": -1}',
    '{"unknown": 1}',
    '[1]',
]


def test_bad_controlbench_requests_raise_the_server_messages(server_url: str) -> None:
    sid, env = f"native-{uuid.uuid4().hex}", ControlBenchEnv()
    reset = json.dumps({"case_id": "CASE-A-001"})
    env._env.reset(reset)
    _post(server_url, "/reset", reset, sid)
    for text in BAD_STEPS:
        expected = _server_error(_post(server_url, "/step", text, sid))
        assert 400 <= expected[0] < 500, (text, expected)
        assert _native_error(env._env.step, text) == expected, text
    for text in BAD_RESETS:
        expected = _server_error(_post(server_url, "/reset", text, sid))
        assert _native_error(env._env.reset, text) == expected, text
    # After the end: the episode_ended refusal.
    env._env.reset(reset)
    _post(server_url, "/reset", reset, sid)
    submit = json.dumps({"action_type": "submit_decision", "payload": {"decision": "HOLD", "confidence": 0.5}})
    env._env.step(submit)
    _post(server_url, "/step", submit, sid)
    expected = _server_error(_post(server_url, "/step", submit, sid))
    assert expected[1] == "episode_ended"
    assert _native_error(env._env.step, submit) == expected


def test_step_before_reset_is_refused() -> None:
    status, code, message = _native_error(ControlBenchEnv()._env.step, '{"action_type": "lookup_policy", "payload": {}}')
    assert (status, code) == (409, "reset_required") and "reset" in message
    status, code, _ = _native_error(AuditEnv()._env.step, '{"findings": []}')
    assert (status, code) == (400, "not_initialized")


def test_bad_audit_requests_raise_the_server_messages(audit_server_url: str) -> None:
    sid = f"native-{uuid.uuid4().hex[:12]}"
    env = AuditEnv()
    reset = json.dumps({"task_id": "expense_audit", "seed": 7, "episode_id": "bad", "session_id": sid})
    env._env.reset(reset)
    _post(audit_server_url, "/reset", reset, sid)
    for text in ['{"findings": [{"document_id": 3}]}', '{"findings": [{"error_type": "x"}]}',
                 '{"findings": "none"}', '{"submit_final": "yes"}']:
        resp = _post(audit_server_url, "/step", text, sid)
        expected = _server_error(resp)
        assert _native_error(env._env.step, text) == expected, text
        _assert_same_detail_and_field(resp, env._env.step, text)
    for text in ['{"task_id": "nope"}', '{"seed": [1]}', '{"task_id": 9}']:
        resp = _post(audit_server_url, "/reset", text, sid)
        assert _native_error(env._env.reset, text) == _server_error(resp), text
        _assert_same_detail_and_field(resp, env._env.reset, text)
    final = json.dumps({"findings": [], "submit_final": True})
    env._env.reset(reset)
    _post(audit_server_url, "/reset", reset, sid)
    env._env.step(final)
    _post(audit_server_url, "/step", final, sid)
    resp = _post(audit_server_url, "/step", final, sid)
    assert _native_error(env._env.step, final) == _server_error(resp)
    _assert_same_detail_and_field(resp, env._env.step, final)


def _assert_same_detail_and_field(resp: requests.Response, fn, text: str) -> None:
    """The refusal carries the server's `detail` and `error.field`, in `args` and as
    attributes."""
    with pytest.raises(EnvError) as e:
        fn(text)
    body = resp.json()
    assert body["error"].get("field"), (text, body)
    p = error_parts(e.value)
    assert (p["detail"], p["field"]) == (body["detail"], body["error"]["field"]), text
    err = e.value
    assert (err.message, err.code, err.status, err.detail, err.field) == tuple(err.args), text


def test_controlbench_refusals_name_no_field(server_url: str) -> None:
    env = ControlBenchEnv()
    env.reset(case_id="CASE-A-001")
    with pytest.raises(EnvError) as e:
        env.step('{"payload": {}}')
    assert e.value.field is None and e.value.code == "validation_error" and e.value.status == 422
    resp = _post(server_url, "/step", '{"payload": {}}', f"native-{uuid.uuid4().hex}")
    assert "field" not in resp.json()["error"]


def test_same_seed_and_actions_give_the_same_bytes() -> None:
    seeds = random.sample(range(1, 50_000), 3)
    print(f"determinism seeds {seeds}")
    for seed in seeds:
        runs = []
        for _ in range(2):
            env, rng, out = ControlBenchEnv(), random.Random(seed), []
            out.append(env.reset_text(seed=seed))
            while not env.done:
                out.append(env.step_index_text(rng.randrange(len(env.candidates()) + 1)))
            runs.append(out)
        assert runs[0] == runs[1], seed
        audit = []
        for _ in range(2):
            env, rng = AuditEnv(), random.Random(seed)
            out = [env.reset_text(task_id=AUDIT_TASKS[seed % 4], seed=seed, episode_id="det")]
            while not env.done:
                out.append(env.step_index_text(rng.randrange(len(env.candidates()))))
            audit.append(out)
        assert audit[0] == audit[1], seed


def test_a_rust_panic_is_a_python_exception_and_reset_recovers() -> None:
    for env, reset in ((ControlBenchEnv(), {"case_id": "CASE-B-001"}), (AuditEnv(), {"seed": 3})):
        env.reset(**reset)
        with pytest.raises(RuntimeError, match="internal error"):
            env._env._debug_panic()
        with pytest.raises(EnvError, match="discarded"):
            env.step_index(0)
        assert env.reset(**reset)["observation"]


def test_the_gil_is_released_while_rust_works() -> None:
    """A Python thread keeps running while a long native call (a 1,024-environment vector reset
    drawing generated cases, with replies: tens of milliseconds even in a release build) is in
    progress."""
    vec = _native.ControlBenchVector(1024, "blind", 1)
    stamps: list = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            stamps.append(time.perf_counter())

    t = threading.Thread(target=tick)
    t.start()
    time.sleep(0.05)
    try:
        start = time.perf_counter()
        vec.reset('{"template_split": "all", "generator_split": "all"}', 1, True)
        end = time.perf_counter()
    finally:
        stop.set()
        t.join()
    inside = [s for s in stamps if start < s < end]
    assert end - start > 0.01, "the call was too short to observe"
    assert len(inside) > 10, (len(inside), end - start)


def test_native_tool_env_is_the_default_and_matches_the_server(server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledgershield import LedgerShieldToolEnv, environment_factory

    monkeypatch.delenv("LEDGERSHIELD_URL", raising=False)
    rewards = []
    for Env in (LedgerShieldToolEnv, environment_factory(server_url)):
        with Env() as env:
            env.reset(case_id="CASE-D-001")
            env.inspect_email_thread(thread_id="THR-100")
            env.request_callback_verification()
            env.submit_decision(decision="ESCALATE_FRAUD", confidence=0.9, reason_codes=["sender_domain_spoof"])
            rewards.append(env.get_reward())
            with pytest.raises(ValueError):
                env.lookup_policy()
    assert isinstance(LedgerShieldToolEnv()._client, ledgershield.native.NativeClient)
    assert rewards[0] == rewards[1] and rewards[0] > 0


def test_training_rollouts_in_process_equal_the_servers(server_url: str, audit_server_url: str) -> None:
    """The training package's default (in process) scores a plan and a set of findings exactly as
    the server path (``--url``) does."""
    from ledgershield.training.audit import grade
    from ledgershield.training.rollout import play_plan

    plan = json.dumps([{"action_type": "inspect_email_thread", "payload": {"thread_id": "THR-100"}},
                       {"action_type": "submit_decision", "payload": {"decision": "ESCALATE_FRAUD", "confidence": 0.9}}])
    native, remote = play_plan(None, "CASE-D-001", plan), play_plan(server_url, "CASE-D-001", plan)
    assert native == remote and native["steps"] >= 2 and native["parsed"]
    findings = json.dumps({"findings": [{"document_id": "EXP-003", "error_type": "weekend_expense"}]})
    assert grade(None, "expense_audit", 42, findings) == grade(audit_server_url, "expense_audit", 42, findings)
