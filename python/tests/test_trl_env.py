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


def test_public_methods_are_exactly_the_21_actions() -> None:
    assert sorted(_public_tools(LedgerShieldToolEnv)) == sorted(ACTION_TYPES)


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
        assert '"tool_name":"ocr"' in out
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
