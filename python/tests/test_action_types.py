"""The Python action vocabulary is the Rust declaration's (``action_schemas.json``), not a copy."""

from __future__ import annotations

import json
import os

import ledgershield.models as models
from ledgershield import ACTION_TYPES, INTERVENTIONS, INVESTIGATION_TOOLS


def _declared() -> list[dict]:
    path = os.path.join(os.path.dirname(os.path.abspath(models.__file__)), "action_schemas.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)["actions"]


def test_action_type_is_the_declaration_in_order() -> None:
    declared = _declared()
    assert ACTION_TYPES == tuple(a["name"] for a in declared)
    assert INVESTIGATION_TOOLS == tuple(a["name"] for a in declared if a["kind"] == "investigation")
    assert INTERVENTIONS == tuple(a["name"] for a in declared if a["kind"] == "intervention")
    finals = [a["name"] for a in declared if a["kind"] == "final"]
    assert finals == [ACTION_TYPES[-1]] == ["submit_decision"]


def test_the_generated_block_is_the_one_written() -> None:
    source = open(models.__file__, encoding="utf-8").read()
    assert models.action_type_source() in source
