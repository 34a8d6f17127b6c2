"""Financial Audit campaigns in process (``AuditCampaignEnv``) against the real audit server's
campaign routes: the same calls give byte-identical replies and the same refusals (status,
code, message and the field the server names)."""

from __future__ import annotations

import json
import random

import pytest
import requests

from ledgershield.native import AuditCampaignEnv, EnvError, error_parts

from test_native import audit_server_url  # noqa: F401  (the audit server fixture)

ROLES = ["expense_specialist", "invoice_specialist", "gst_specialist", "fraud_specialist"]


class Pair:
    """One campaign on the server and one in process, driven by the same bodies."""

    def __init__(self, url: str, seed: int, total_periods: int) -> None:
        self.url = url
        body = {"seed": seed, "total_periods": total_periods}
        http = requests.post(f"{url}/campaign/start", json=body, timeout=60)
        assert http.status_code == 200, http.text[:300]
        self.id = http.json()["campaign_id"]
        self.native = AuditCampaignEnv()
        # The server draws the id; the in-process campaign is given the same one.
        text = self.native.start_text(**body, campaign_id=self.id)
        assert text.encode() == http.content, "campaign start"
        self.compared = 1

    def post(self, path: str, method: str, **body: object) -> dict:
        """POST the body (with the campaign id) to both; the same bytes, or the same refusal."""
        body = dict(body, campaign_id=self.id)
        http = requests.post(f"{self.url}{path}", data=json.dumps(body), timeout=120,
                             headers={"Content-Type": "application/json"})
        fn = getattr(self.native, f"{method}_text")
        if http.status_code != 200:
            with pytest.raises(EnvError) as e:
                fn(**body)
            assert_same_refusal(http, e.value, path)
            return {"error": http.json()}
        native = fn(**body)
        assert native.encode() == http.content, (path, body)
        self.compared += 1
        return json.loads(native)

    def get(self, path: str, method: str) -> dict:
        http = requests.get(f"{self.url}{path}", params={"campaign_id": self.id}, timeout=60)
        assert http.status_code == 200, (path, http.text[:300])
        native = getattr(self.native, f"{method}_text")()
        assert native.encode() == http.content, path
        self.compared += 1
        return json.loads(native)


def assert_same_refusal(http: requests.Response, e: BaseException, what: object) -> None:
    body = http.json()
    p = error_parts(e)
    assert (p["status"], p["code"], p["message"]) == (http.status_code, body["error"]["code"], body["error"]["message"]), what
    assert p["field"] == body["error"].get("field") and p["detail"] == body["detail"], what
    assert (e.status, e.code, e.field) == (p["status"], p["code"], p["field"])  # type: ignore[attr-defined]


def findings_of(reply: dict, rng: random.Random) -> list:
    """Up to two findings on records the period observation shows (a record whose id is blank,
    as a planted missing-id error leaves it, cannot be cited), error types drawn from its valid
    ones."""
    obs = reply["observation"]["period_observation"]
    types = obs["metadata"].get("valid_error_types", [])
    ids = [v for records in obs["documents"].values() if isinstance(records, list)
           for r in records if isinstance(r, dict)
           for k, v in r.items() if (k.endswith("_id") or k.endswith("_no")) and isinstance(v, str) and v.strip()]
    return [{"document_id": rng.choice(ids), "error_type": rng.choice(types), "confidence": 0.8}
            for _ in range(2)] if ids and types else []


def test_a_whole_campaign_is_byte_identical_to_the_server(audit_server_url: str) -> None:  # noqa: F811
    # Keyless campaigns on held-out seeds are refused by the server (periods p play seed + p - 1;
    # held out: 100-104): draw a training seed.
    seed = random.choice([s for s in range(1, 10_000) if not 98 <= s <= 104])
    print(f"campaign seed {seed}")
    rng = random.Random(seed)
    c = Pair(audit_server_url, seed, 3)
    # Out of order: the invoice specialist before the expense specialist.
    refused = c.post("/campaign/task/start", "task_start", role="invoice_specialist")
    assert refused["error"]["error"]["code"] == "dependency_violation"
    for period in range(3):
        for i, role in enumerate(ROLES):
            started = c.post("/campaign/task/start", "task_start", role=role)
            assert "error" not in started, (period, role, started)
            findings = findings_of(started, rng)
            if i % 2:  # the alias route, a partial submit first
                replies = [c.post("/campaign/action", "action", role=role, findings=findings[:1], submit_final=False),
                           c.post("/campaign/action", "action", role=role, findings=findings[1:], submit_final=True)]
            else:
                replies = [c.post("/campaign/task/submit", "task_submit", role=role, findings=findings, submit_final=True)]
            assert all("error" not in r for r in replies), (period, role, findings, replies)
        c.get("/campaign/state", "state")
        c.post("/overseer/review", "review", decisions=[], audit_trail_id=f"p{period}")
        c.get("/overseer/report", "report")
        advanced = c.post("/campaign/period/advance", "advance")
        assert advanced["status"] == ("completed" if period == 2 else "advanced")
    assert c.native.finished
    c.get("/campaign/state", "state")
    c.post("/self-improve", "self_improve", train_seeds=[42, 43], held_out_seeds=[100])
    c.get("/self-improve/history", "improve_history")
    # A finished campaign refuses further work, as the server does.
    c.post("/campaign/task/start", "task_start", role="expense_specialist")
    assert c.compared >= 40, c.compared


def test_bad_campaign_requests_raise_the_server_refusals(audit_server_url: str) -> None:  # noqa: F811
    c = Pair(audit_server_url, random.choice([s for s in range(1, 10_000) if not 99 <= s <= 104]), 2)
    for body in ({"role": "nobody"}, {"role": 3}, {}, {"role": "overseer"}):
        c.post("/campaign/task/start", "task_start", **body)
    c.post("/campaign/task/submit", "task_submit", role="expense_specialist", findings="none")
    c.post("/campaign/task/submit", "task_submit", role="expense_specialist", findings=[{"error_type": "x"}])
    c.post("/campaign/task/submit", "task_submit", role="overseer", findings=[])
    c.post("/self-improve", "self_improve", train_seeds=[], held_out_seeds=[1])
    c.post("/self-improve", "self_improve", train_seeds=[5], held_out_seeds=[5])
    for body in ({"total_periods": 0}, {"total_periods": 99}, {"seed": "x"}):
        http = requests.post(f"{audit_server_url}/campaign/start", json=body, timeout=60)
        with pytest.raises(EnvError) as e:
            AuditCampaignEnv().start(**body)
        assert_same_refusal(http, e.value, body)
    # Another campaign's id is an unknown campaign (404, field campaign_id), as on the server.
    other = requests.post(f"{audit_server_url}/campaign/period/advance", json={"campaign_id": "cmp-nope"}, timeout=60)
    with pytest.raises(EnvError) as e:
        c.native.advance(campaign_id="cmp-nope")
    assert_same_refusal(other, e.value, "unknown campaign")
    assert e.value.field == "campaign_id" and e.value.status == 404  # type: ignore[attr-defined]


def test_a_campaign_before_its_start_is_refused_and_ids_are_drawn() -> None:
    fresh = AuditCampaignEnv()
    assert fresh.campaign_id is None
    with pytest.raises(EnvError) as e:
        fresh.state()
    assert (e.value.status, e.value.code) == (409, "conflict") and "start" in e.value.message  # type: ignore[attr-defined]
    ids = {AuditCampaignEnv().start(seed=1)["campaign_id"] for _ in range(3)}
    assert len(ids) == 3 and all(i.startswith("cmp") for i in ids)
    a, b = AuditCampaignEnv(), AuditCampaignEnv()
    assert a.start_text(seed=9, campaign_id="x") == b.start_text(seed=9, campaign_id="x")
