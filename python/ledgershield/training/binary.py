"""The ``ledgershield`` binary: locate it, run suites with an agent, serve environments.

Every environment interaction of the training package goes through the binary's public
interfaces (``ledgershield run``/``export``/``serve``), so the Python side never re-implements
the action protocol: the ``llm`` agent's step prompts and reply parsing are the Rust ones.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

REPO = Path(__file__).resolve().parents[3]


def find_binary(explicit: Optional[str] = None) -> str:
    """``explicit``, else ``LEDGERSHIELD_BIN``, else the repository's debug build, else ``PATH``."""
    for cand in (explicit, os.environ.get("LEDGERSHIELD_BIN"), str(REPO / "target" / "debug" / "ledgershield")):
        if cand and Path(cand).exists():
            return str(Path(cand).resolve())
    found = shutil.which("ledgershield")
    if found:
        return found
    raise FileNotFoundError("ledgershield binary not found: build it (`cargo build -p ledgershield`) or set LEDGERSHIELD_BIN / --bin")


def run_agent(
    binary: str,
    agent: str,
    db: Path,
    suite: str = "public",
    seed: int = 2026,
    cases: Iterable[str] = (),
    extra: Iterable[str] = (),
    env: Optional[Dict[str, str]] = None,
    timeout: float = 3600,
) -> Dict[str, Any]:
    """``ledgershield run --format json``: the run summary (``run_id``, ``episodes``, ``metrics``)."""
    cmd = [binary, "run", "--agent", agent, "--suite", suite, "--seed", str(seed), "--format", "json", "--db", str(db)]
    cases = list(cases)
    if cases:
        cmd += ["--cases", ",".join(cases)]
    cmd += list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:8])} ... failed ({proc.returncode}): {proc.stderr[:2000]}")
    out = proc.stdout
    return json.loads(out[out.index("{"):])


def episode_records(db: Path, run_id: str) -> List[Dict[str, Any]]:
    """The stored ``EpisodeRecord``s of one run, in play order."""
    with sqlite3.connect(str(db)) as con:
        rows = con.execute("SELECT record_json FROM episodes WHERE run_id = ? ORDER BY idx", (run_id,)).fetchall()
    return [json.loads(r[0]) for r in rows]


def export(binary: str, db: Path, out: Path, fmt: str, runs: Iterable[str], min_score: float = 0.0, eval_fraction: float = 0.3, seed: int = 7) -> Dict[str, Any]:
    """``ledgershield export``; returns ``split.json`` (sft/steps) or ``{}``."""
    cmd = [binary, "export", "--format", fmt, "--out", str(out), "--db", str(db), "--min-score", str(min_score), "--eval-fraction", str(eval_fraction), "--seed", str(seed)]
    for r in runs:
        cmd += ["--run", r]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ledgershield export failed: {proc.stderr[:2000]}")
    split = out / "split.json"
    return json.loads(split.read_text()) if fmt != "trajectories" and split.exists() else {}


# Operator keys of the servers this process started (``Server``), by URL.
_OPERATOR_KEYS: Dict[str, str] = {}


def operator_key(url: str) -> Optional[str]:
    """The operator credential for the server at ``url``: the key of a ``Server`` this process
    started, else ``ADMIN_API_KEY``, else the key file the server writes when none is configured
    (``LEDGERSHIELD_OPERATOR_KEY_FILE``, default ``operator-key-<port>`` in
    ``$XDG_STATE_HOME/ledgershield/`` or ``~/.local/state/ledgershield/``: one file per server
    port). None when there is none to read."""
    if url in _OPERATOR_KEYS:
        return _OPERATOR_KEYS[url]
    if os.environ.get("ADMIN_API_KEY"):
        return os.environ["ADMIN_API_KEY"]
    path = os.environ.get("LEDGERSHIELD_OPERATOR_KEY_FILE")
    if not path:
        state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
        port = urllib.parse.urlsplit(url).port or 80
        path = os.path.join(state, "ledgershield", f"operator-key-{port}")
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


class Server:
    """``ledgershield serve --port 0`` for the life of a ``with`` block; ``.url`` is its address.
    It runs with an operator key of its own (``.key``, also found by :func:`operator_key`), so it
    neither reads nor overwrites the user's key file."""

    def __init__(self, binary: str, env_kind: str = "controlbench", extra_env: Optional[Dict[str, str]] = None) -> None:
        self.binary = binary
        self.env_kind = env_kind
        self.extra_env = extra_env or {}
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""

    def __enter__(self) -> "Server":
        env = dict(os.environ, LEDGERSHIELD_LOG="warn", **self.extra_env)
        self.key = env.get("ADMIN_API_KEY") or secrets.token_hex(32)
        env["ADMIN_API_KEY"] = self.key
        env.setdefault("LEDGERSHIELD_WORKERS", "1")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--host", "127.0.0.1", "--port", "0", "--env", self.env_kind],
            stdout=subprocess.PIPE, stderr=sys.stderr, text=True, env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            self.__exit__()
            raise RuntimeError(f"server did not report its address: {line!r}")
        self.url = m.group(1).rstrip("/")
        _OPERATOR_KEYS[self.url] = self.key
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("server did not become healthy")

    def __exit__(self, *exc: Any) -> None:
        _OPERATOR_KEYS.pop(self.url, None)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
