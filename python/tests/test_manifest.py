"""The repository's openenv.yaml manifest is well-formed and matches the server."""

from __future__ import annotations

import requests
import yaml

from conftest import REPO


def test_manifest_matches_server(server_url: str) -> None:
    manifest = yaml.safe_load((REPO / "openenv.yaml").read_text(encoding="utf-8"))
    assert manifest["spec_version"] == 1
    assert manifest["name"] == "ledgershield"
    assert isinstance(manifest["port"], int)
    meta = requests.get(f"{server_url}/metadata", timeout=10).json()
    assert meta["name"].startswith(manifest["name"])
