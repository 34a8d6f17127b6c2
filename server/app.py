"""OpenEnv entry point: start the LedgerShield server (the Rust binary) in the foreground.

`uv run server`, `openenv serve` and `python -m server.app` call `main()`, which runs
`ledgershield serve` with the arguments given (default `--host 0.0.0.0 --port 8000`, the port
openenv.yaml declares; `--env audit` serves the Financial Audit environment). The binary is
`$LEDGERSHIELD_BIN`, else `ledgershield` on PATH, else this checkout's target/release or
target/debug build.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def find_binary() -> str:
    """The ledgershield binary to run, or SystemExit naming where it was looked for."""
    env = os.environ.get("LEDGERSHIELD_BIN")
    if env:
        return env
    on_path = shutil.which("ledgershield")
    if on_path:
        return on_path
    for profile in ("release", "debug"):
        candidate = ROOT / "target" / profile / "ledgershield"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise SystemExit(
        "ledgershield binary not found: set LEDGERSHIELD_BIN, put it on PATH, "
        "or build it with `cargo build --release -p ledgershield`"
    )


def main(argv: list[str] | None = None) -> None:
    """Replace this process with `ledgershield serve ARGS` (signals reach the server directly)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a == "--port" or a.startswith("--port=") for a in args):
        args += ["--port", os.environ.get("PORT", "8000")]
    if not any(a == "--host" or a.startswith("--host=") for a in args):
        args += ["--host", "0.0.0.0"]
    binary = find_binary()
    os.execv(binary, [binary, "serve", *args])


if __name__ == "__main__":
    main()
