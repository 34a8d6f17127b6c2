"""Every Python example of docs/python.md runs as written, each in a fresh interpreter.

Each ```python block of the page is preceded by a marker, ``<!-- example: KIND -->``: ``native``
(in process), ``server`` (against the test server: its URL replaces ``http://127.0.0.1:8000``)
or ``sb3`` (needs torch, stable-baselines3 and sb3-contrib: run where they are installed, the
training smoke); ``trl`` blocks (GRPO through TRL) are run by ``test_doc_snippets.py -k trl`` in
the training smoke. A block without a marker fails the test, so a new example cannot go untested.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"
KINDS = ("native", "server", "sb3", "trl")
DOC_URL = "http://127.0.0.1:8000"


def examples() -> List[Tuple[int, str, str]]:
    """(line, kind, code) of every Python block of the page."""
    text = DOC.read_text()
    out = []
    for m in re.finditer(r"```python\n(.*?)```", text, re.S):
        line = text[: m.start()].count("\n") + 1
        before = text[: m.start()].rstrip().splitlines()[-1] if m.start() else ""
        kind = re.fullmatch(r"<!-- example: (\w+) -->", before.strip())
        out.append((line, kind.group(1) if kind else "", m.group(1)))
    return out


def test_every_example_is_marked() -> None:
    found = examples()
    assert len(found) >= 10
    unmarked = [line for line, kind, _ in found if kind not in KINDS]
    assert not unmarked, f"docs/python.md: python blocks without an example marker at lines {unmarked}"


def _run(code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ)
    # Run from the temporary directory: the installed package, not the source tree.
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize("line,kind,code", [e for e in examples() if e[1] == "native"],
                         ids=lambda v: str(v) if isinstance(v, int) else None)
def test_native_examples_run(line: int, kind: str, code: str, tmp_path: Path) -> None:
    _run(code, tmp_path)


@pytest.mark.parametrize("line,kind,code", [e for e in examples() if e[1] == "server"],
                         ids=lambda v: str(v) if isinstance(v, int) else None)
def test_server_examples_run(line: int, kind: str, code: str, server_url: str, tmp_path: Path) -> None:
    assert DOC_URL in code, f"line {line}: a server example names {DOC_URL}"
    _run(code.replace(DOC_URL, server_url), tmp_path)


@pytest.mark.parametrize("line,kind,code", [e for e in examples() if e[1] == "sb3"],
                         ids=lambda v: str(v) if isinstance(v, int) else None)
def test_sb3_examples_run(line: int, kind: str, code: str, tmp_path: Path) -> None:
    for module in ("torch", "stable_baselines3", "sb3_contrib"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the training smoke runs these)")
    _run(code, tmp_path)
