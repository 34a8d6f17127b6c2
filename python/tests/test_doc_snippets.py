"""Every documented code block runs as written.

The blocks tagged ``bash``/``sh``/``python`` in README.md, TRAINING.md, python/README.md and
docs/*.md are collected in file order. A block is either run, or the line before its fence says
why it is not (``<!-- snippet-test: not run: REASON -->``: a deployment command CI runs in its own
script, the test-suite entry points themselves, a 20-minute training run); a block with no such
line must run. Each file's blocks run in order in one fresh network namespace (so
``localhost:8000`` is theirs), in a scratch directory, through ``snippet_driver.py`` (its
docstring lists the plumbing: the cargo/pip shims and the wait for a background server). A block
passes when it exits 0 and every JSON reply it prints is free of ``error`` objects; the quick
start's two submissions are also checked for their documented scores.

Blocks that import torch, TRL or datasets (the GRPO examples, sized for a CPU) run where those are
installed: scripts/ci-training-smoke.sh runs ``-k trl`` in the training venv; the main suite skips
them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", ROOT / "TRAINING.md", ROOT / "python" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SKIP = re.compile(r"<!--\s*snippet-test:\s*not run:\s*(.+?)\s*-->")
# Blocks that need the training extra: they import torch/TRL/datasets or the stock RL libraries
# (SB3, sb3-contrib: the `rl` extra), install `./python[train]` or run a training command.
HEAVY = re.compile(r"^\s*(from|import)\s+(trl|torch|datasets|transformers|stable_baselines3|sb3_contrib)\b|python\[train\]|ledgershield\.training", re.M)


def collect() -> List[Dict[str, Any]]:
    out = []
    for path in SOURCES:
        if not path.exists():
            continue
        text = path.read_text()
        for m in FENCE.finditer(text):
            lang = {"sh": "bash", "shell": "bash"}.get(m.group(1), m.group(1))
            if lang not in ("bash", "python"):
                continue
            line = text[: m.start()].count("\n") + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            skip = SKIP.search(before)
            out.append({"file": str(path.relative_to(ROOT)), "line": line, "lang": lang, "code": m.group(2),
                        "skip": skip.group(1) if skip else None, "heavy": bool(HEAVY.search(m.group(2)))})
    return out


SNIPPETS = collect()
FILES = sorted({s["file"] for s in SNIPPETS if not s["skip"] and not s["heavy"]})


def test_every_block_runs_or_says_why() -> None:
    assert len(SNIPPETS) >= 15, "the documentation's code blocks were not found"
    for s in SNIPPETS:
        if s["skip"]:
            assert len(s["skip"]) >= 20, f"{s['file']}:{s['line']}: say why it is not run"
    run = [s for s in SNIPPETS if not s["skip"]]
    # The quick start and the documented GRPO examples are among the blocks that run.
    assert any(s["file"] == "README.md" and "CASE-B-003" in s["code"] for s in run)
    assert sum("GRPOTrainer" in s["code"] for s in run) >= 2


def _replies(stdout: str) -> List[Dict[str, Any]]:
    """Every JSON object printed (curl prints replies without a newline between them)."""
    dec, out, i = json.JSONDecoder(), [], 0
    while True:
        i = stdout.find("{", i)
        if i < 0:
            return out
        try:
            obj, end = dec.raw_decode(stdout, i)
        except ValueError:
            i += 1
            continue
        if isinstance(obj, dict):
            out.append(obj)
        i = end


def _binary() -> str:
    b = os.environ.get("LEDGERSHIELD_BIN") or str(ROOT / "target" / "debug" / "ledgershield")
    if not Path(b).exists():
        pytest.skip(f"server binary not built at {b}")
    return b


def _run_file(name: str, tmp_path: Path, heavy: bool) -> List[Dict[str, Any]]:
    blocks = [s for s in SNIPPETS if s["file"] == name and not s["skip"]]
    if any(s["heavy"] for s in blocks) and not heavy:
        blocks = [s for s in blocks if not s["heavy"]]
    for s in blocks:
        s["timeout"] = 900 if s["heavy"] else 300
    work = tmp_path / "work"
    work.mkdir()
    netns = shutil.which("unshare") is not None and shutil.which("ip") is not None
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"work": str(work), "repo": str(ROOT), "binary": _binary(), "snippets": blocks, "netns": netns}))
    driver = [sys.executable, str(Path(__file__).with_name("snippet_driver.py")), str(spec)]
    argv = ["unshare", "-n", *driver] if netns else driver
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if netns and proc.returncode != 0 and "unshare" in proc.stderr:
        pytest.skip(f"no network namespace here: {proc.stderr[:200]}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) == len(blocks), f"stopped after {results[-1]['line'] if results else '-'}: {results[-1:]}"
    for s, r in zip(blocks, results):
        where = f"{name}:{s['line']}"
        assert r["rc"] == 0, f"{where} exited {r['rc']}\n{r['stdout'][-3000:]}\n{r['stderr'][-3000:]}"
        for reply in _replies(r["stdout"]):
            assert "error" not in reply, f"{where}: {reply}"
        s["result"] = r
    return blocks


def _trl_available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "trl", "datasets"))


@pytest.mark.parametrize("name", FILES)
def test_documented_blocks_run_as_written(name: str, tmp_path: Path) -> None:
    blocks = _run_file(name, tmp_path, heavy=False)
    if name == "README.md":
        # The quick start: the bare submission scores low, as the README says; the good one 0.99.
        bare = next(s for s in blocks if "CASE-D-001" in s["code"] and "submit_decision" in s["code"])
        good = next(s for s in blocks if "CASE-B-003" in s["code"])
        last = _replies(bare["result"]["stdout"])[-1]["info"]
        assert (last["final_score"], last["result_class"]) == (0.0316, "malformed_submission"), last
        last = _replies(good["result"]["stdout"])[-1]["info"]
        assert (last["final_score"], last["result_class"]) == (0.99, "valid_success"), last


TRL_FILES = sorted({s["file"] for s in SNIPPETS if s["heavy"] and not s["skip"]})


@pytest.mark.parametrize("name", TRL_FILES)
def test_documented_trl_blocks_run_on_cpu(name: str, tmp_path: Path) -> None:
    if not _trl_available():
        pytest.skip("torch/trl/datasets are not installed (scripts/ci-training-smoke.sh runs this)")
    blocks = _run_file(name, tmp_path, heavy=True)
    grpo = [s for s in blocks if "GRPOTrainer" in s["code"]]
    assert grpo
    for s in grpo:
        assert "GRPO step done: 1" in s["result"]["stdout"], s["result"]["stdout"][-2000:]
