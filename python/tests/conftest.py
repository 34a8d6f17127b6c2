"""Fixtures: a real ``ledgershield serve`` on a free port for the whole test session.

The binary comes from ``LEDGERSHIELD_BIN`` (default ``target/debug/ledgershield`` at the
repository root; build it with ``cargo build -p ledgershield``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
FAMILY_CASES = {"A": "CASE-A-001", "B": "CASE-B-001", "C": "CASE-C-001", "D": "CASE-D-001", "E": "CASE-E-001"}


def _binary() -> Path:
    path = Path(os.environ.get("LEDGERSHIELD_BIN", REPO / "target" / "debug" / "ledgershield"))
    if not path.is_absolute():
        path = REPO / path
    if not path.exists():
        pytest.exit(f"ledgershield binary not found at {path}; run `cargo build -p ledgershield` or set LEDGERSHIELD_BIN", returncode=2)
    return path


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    env = dict(os.environ, LEDGERSHIELD_LOG="warn")
    proc = subprocess.Popen(
        [str(_binary()), "serve", "--host", "127.0.0.1", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            raise RuntimeError(f"server did not report its address (exit {proc.poll()}): {line!r}")
        url = m.group(1).rstrip("/")
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("server did not become healthy")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        assert proc.returncode is not None


def first_doc(observation: dict) -> str:
    return observation["visible_documents"][0]["doc_id"]


def scripted_actions(observation: dict) -> list[dict]:
    """A short, valid episode: OCR the first document, read the policy, take one intervention, submit."""
    return [
        {"action_type": "ocr", "payload": {"doc_id": first_doc(observation), "mode": "fast"}},
        {"action_type": "lookup_policy", "payload": {}},
        {"action_type": "request_callback_verification", "payload": {}},
        {
            "action_type": "submit_decision",
            "payload": {"decision": "NEEDS_REVIEW", "confidence": 0.6, "reason_codes": [], "evidence_map": {}},
        },
    ]
