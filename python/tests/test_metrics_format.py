"""`GET /metrics` is the format its content type names (issue 47): the text format 0.0.4 by
default, read by ``prometheus_client``'s 0.0.4 parser with every counter typed ``counter`` (none
``unknown``), and OpenMetrics when asked for, read by its OpenMetrics parser."""

from __future__ import annotations

import requests
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

COUNTERS = {"ledgershield_http_requests", "ledgershield_http_errors", "ledgershield_sessions_created",
            "ledgershield_episodes_started"}


def test_default_exposition_is_text_004_with_typed_counters(server_url: str) -> None:
    requests.post(f"{server_url}/reset", json={"case_id": "CASE-A-001"}).raise_for_status()
    r = requests.get(f"{server_url}/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in parse_text(r.text)}
    assert COUNTERS <= set(families), sorted(families)
    for name in COUNTERS:
        assert families[name].type == "counter", (name, families[name].type)
    assert not [f.name for f in families.values() if f.type == "unknown"], "untyped families"
    assert families["ledgershield_http_request_duration_seconds"].type == "histogram"
    assert families["ledgershield_sessions_active"].type == "gauge"


def test_openmetrics_is_served_when_asked_for(server_url: str) -> None:
    r = requests.get(f"{server_url}/metrics",
                     headers={"Accept": "application/openmetrics-text;version=1.0.0;q=0.75,text/plain;version=0.0.4;q=0.5"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    families = {f.name: f for f in parse_openmetrics(r.text)}
    for name in COUNTERS & set(families):
        assert families[name].type == "counter"
    assert "ledgershield_http_requests" in families
