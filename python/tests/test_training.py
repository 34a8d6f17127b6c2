"""The training pipeline's protocol and data hygiene, without torch: collect (teacher runs and
the per-step export), the perfect-imitation mock through ``evaluate`` and through
``ledgershield run --agent llm``, the plan parser, the stratified split and the score filter."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import _binary
from ledgershield.training.binary import episode_records, export, run_agent
from ledgershield.training.collect import collect, expand_suites, pick_eval_cases
from ledgershield.training.evaluate import compare, metrics
from ledgershield.training.modelserver import ReplayPolicy, json_complete, serve
from ledgershield.training.rollout import parse_actions


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("collect")
    collect(str(_binary()), out, ["public", "holdout:1"], split_by="base")
    return out


def test_expand_suites() -> None:
    assert expand_suites(["public", "quarter:3-5", "holdout:9"]) == [("public", 2026), ("quarter", 3), ("quarter", 4), ("quarter", 5), ("holdout", 9)]


def test_split_by_base_and_stratified_by_family(data: Path) -> None:
    split = json.loads((data / "split.json").read_text())
    train, held = set(split["train_base_cases"]), set(split["eval_base_cases"])
    assert train and held and not (train & held)
    families = {e["task_type"] for e in json.loads((data / "eval_cases.json").read_text())}
    assert families == {"task_a", "task_b", "task_c", "task_d", "task_e"}, families
    for line in (data / "steps_train.jsonl").read_text().splitlines():
        assert json.loads(line)["metadata"]["base_case_id"] in train
    picked = pick_eval_cases(json.loads((data / "eval_cases.json").read_text()), 5)
    assert {c["task_type"] for c in picked} == families, "round-robin over families"


def test_template_split_follows_the_task_distribution(data: Path, tmp_path: Path) -> None:
    """``split_by="templates"`` (collect's default): a row's side is its base template's split
    (``_native.TEMPLATE_SPLITS``): train rows train, test templates held out, validation apart."""
    import shutil

    from ledgershield import _native
    from ledgershield.training.collect import split_by_templates

    splits = dict(_native.TEMPLATE_SPLITS)
    for f in ("steps_train.jsonl", "steps_eval.jsonl", "sft_train.jsonl", "sft_eval.jsonl"):
        shutil.copy(data / f, tmp_path / f)
    new = split_by_templates(tmp_path, json.loads((data / "split.json").read_text()))
    side_of = {"train": "train", "validation": "validation", "eval": "test"}
    for side, want in side_of.items():
        rows = [json.loads(x) for x in (tmp_path / f"steps_{side}.jsonl").read_text().splitlines()]
        assert rows, side
        assert all(splits[str(r["metadata"].get("base_case_id") or r["metadata"]["case_id"])] == want for r in rows), side
    assert not set(new["train_base_cases"]) & set(new["eval_base_cases"])
    assert {e["case_id"] for e in new["eval_episodes"]} and new["split_by"].startswith("template")


def test_step_rows_are_chat_prompt_completion(data: Path) -> None:
    rows = [json.loads(l) for l in (data / "steps_train.jsonl").read_text().splitlines()]
    assert rows
    for r in rows[:50]:
        assert [m["role"] for m in r["prompt"]] == ["system", "user"]
        target = r["completion"][0]["content"]
        acts = parse_actions(target)
        assert acts and acts[0]["action_type"] == r["metadata"]["action_type"]
    # Closed loop: later steps see the earlier actions and their results.
    later = [r for r in rows if r["metadata"]["step"] > 1]
    assert later and all("Previous actions: \n" not in r["prompt"][1]["content"] for r in later)


def test_perfect_imitation_scores_what_the_teacher_scores_through_evaluate(data: Path, tmp_path: Path) -> None:
    cases = json.loads((data / "eval_cases.json").read_text())
    replay = ReplayPolicy([data / "steps_eval.jsonl", data / "steps_train.jsonl"])
    rows = compare(str(_binary()), cases, tmp_path / "runs.db", tmp_path, ["teacher", "naive-pay"], {"replay": replay}, max_tokens=4096)
    by = {r["policy"]: r for r in rows}
    assert by["replay"]["episodes"] == by["teacher"]["episodes"] == len(cases)
    assert abs(by["replay"]["mean_score"] - by["teacher"]["mean_score"]) <= 0.02, by
    assert by["replay"]["parse_success"] == 1.0 and replay.misses == 0
    assert by["teacher"]["mean_score"] > by["naive-pay"]["mean_score"] + 0.3
    header = (tmp_path / "policy_matrix.csv").read_text().splitlines()[0]
    for col in ("mean_score", "mean_total_reward", "control_satisfied_resolution", "certificate_score", "parse_success", "unsafe_release_rate", "result_class_counts"):
        assert col in header


def test_perfect_imitation_through_run_agent_llm(data: Path, tmp_path: Path) -> None:
    ids = [e["case_id"] for e in json.loads((data / "eval_cases.json").read_text()) if e["suite"] == "public"]
    base, server = serve(ReplayPolicy([data / "steps_eval.jsonl"]))
    try:
        llm = run_agent(str(_binary()), "llm", tmp_path / "r.db", cases=ids,
                        extra=["--api-base", base, "--model", "local/replay", "--max-tokens", "4096", "--retries", "0"])
    finally:
        server.shutdown()
    teacher = run_agent(str(_binary()), "teacher", tmp_path / "r.db", cases=ids)
    assert len(llm["episodes"]) == len(ids) >= 5
    assert abs(llm["metrics"]["mean_score"] - teacher["metrics"]["mean_score"]) <= 0.02
    # The stored run is a normal run (it reaches the leaderboard like any other).
    assert metrics("llm", "local/replay", episode_records(tmp_path / "r.db", llm["run_id"]))["episodes"] == len(ids)


def test_min_score_filters_episodes(data: Path, tmp_path: Path) -> None:
    runs = json.loads((data / "collect.json").read_text())["runs"]
    loose = export(str(_binary()), data / "runs.db", tmp_path / "a", "steps", runs, min_score=0.0)
    strict = export(str(_binary()), data / "runs.db", tmp_path / "b", "steps", runs, min_score=0.95)
    assert strict["episodes_kept"] < loose["episodes_kept"] == loose["episodes_recorded"]
    with pytest.raises(RuntimeError, match="no usable episodes"):
        export(str(_binary()), data / "runs.db", tmp_path / "c", "steps", runs, min_score=2.0)


def test_unsubmitted_episodes_are_not_training_data(tmp_path: Path) -> None:
    # A reset failure (no server at the URL) records an episode with no steps: never exported.
    db = tmp_path / "r.db"
    proc = subprocess.run([str(_binary()), "run", "--agent", "teacher", "--url", "http://127.0.0.1:9", "--cases", "CASE-A-001",
                           "--format", "json", "--db", str(db), "--timeout-secs", "2"], capture_output=True, text=True)
    import sqlite3

    stored = []
    if db.exists():
        with sqlite3.connect(db) as con:
            stored = [r[0] for r in con.execute("SELECT run_id FROM runs")]
    if not stored:
        pytest.skip(f"the failed run was not stored (exit {proc.returncode})")
    good = run_agent(str(_binary()), "teacher", db, cases=["CASE-A-001"], seed=7)  # a distinct run id
    runs = stored + [good["run_id"]]
    split = export(str(_binary()), db, tmp_path / "out", "steps", runs)
    assert split["episodes_recorded"] == 2 and split["episodes_kept"] == 1, split
    assert good["metrics"]["mean_score"] > 0.5


def test_plan_parser_follows_the_llm_agent() -> None:
    assert parse_actions('```json\n{"action_type": "ocr", "payload": {"doc_id": "X"}}\n```') == [{"action_type": "ocr", "payload": {"doc_id": "X"}}]
    plan = parse_actions('sure {"actions": [{"action_type": "zoom"}, 3, {"action_type": "submit_decision", "payload": {"decision": "HOLD"}}]} x')
    assert [a["action_type"] for a in plan or []] == ["zoom", "submit_decision"]
    assert parse_actions("I cannot help") is None and parse_actions('{"actions": []}') is None
    assert json_complete('{"a": "}"}') and not json_complete('{"a": {')


def test_findings_parser_json_first_then_salvage() -> None:
    from ledgershield.training.audit import parse_findings

    types = ["over_limit", "weekend_expense"]
    j = parse_findings('ok: {"findings": [{"document_id": "EXP-001", "error_type": "OVER_LIMIT"}]}', types)
    assert j["mode"] == "json" and j["findings"][0]["error_type"] == "over_limit"
    assert parse_findings('[{"document_id": "EXP-2", "error_type": "weekend_expense"}]', types)["mode"] == "json"
    s = parse_findings("EXP-003 is a weekend_expense\nEXP-004: over_limit by 20%\nEXP-005 looks fine\nEXP-003 weekend_expense", types)
    assert s["mode"] == "salvaged" and [(f["document_id"], f["error_type"]) for f in s["findings"]] == [("EXP-003", "weekend_expense"), ("EXP-004", "over_limit")]
    assert parse_findings("nothing here", types) == {"findings": [], "mode": "none"}
