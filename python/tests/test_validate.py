"""openenv-core's own validator against the live server: every criterion must pass."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from openenv.cli._validation import validate_running_environment


def _openenv_cli() -> list[str]:
    exe = Path(sys.executable).with_name("openenv")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("openenv")
    return [found] if found else [sys.executable, "-m", "openenv.cli"]


def test_openenv_validate_cli_passes_every_criterion(server_url: str) -> None:
    proc = subprocess.run([*_openenv_cli(), "validate", "--url", server_url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["passed"] is True
    assert report["mode"] == "simulation"
    assert report["standard_profile"] == "openenv-http/1.x"
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert failed == []
    ids = {c["id"] for c in report["criteria"]}
    assert {"openapi_version_available", "health_endpoint", "metadata_endpoint", "schema_endpoint", "mcp_endpoint", "mode_endpoint_consistency"} <= ids
    assert report["summary"]["passed_count"] == report["summary"]["total_count"]


def test_validator_entry_point(server_url: str) -> None:
    report = validate_running_environment(server_url)
    assert report["passed"], report
    assert all(c["passed"] for c in report["criteria"])
