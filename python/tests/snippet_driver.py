"""Runs one documentation file's code blocks in order, as a reader would, and prints the results
as JSON. Started by ``test_doc_snippets.py`` inside a fresh network namespace (``unshare -n``),
so the blocks' ``localhost:8000`` is free and private to them.

Plumbing around the blocks, never inside them:

* ``lo`` is brought up; the blocks run in a scratch directory holding ``target/debug/ledgershield``
  (a link to the built binary) and ``python`` (a link to the package source), so the relative
  paths the docs use resolve.
* Shims first on PATH: ``cargo build -p ledgershield`` succeeds when the binary is built and
  ``cargo run [--release] -p ledgershield -- ARGS`` runs the built binary with ARGS (a release
  build takes minutes on two cores; the binary is the same program); ``ledgershield`` is the
  binary; ``pip install SPEC...`` succeeds when every spec is already installed in this
  interpreter (the namespace has no network) and fails naming the first that is not; ``python``
  is this interpreter.
* A bash line that starts a server in the background (``... serve ... &``) is followed by a wait
  until port 8000 answers, as a reader waits before typing the next command.
* Every process a block left running (a background server) is killed when the file is done.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PIP_SHIM = r'''#!PYTHON
import importlib.metadata as md, re, sys
args = [a for a in sys.argv[1:] if not a.startswith("-")]
if not args or args[0] != "install":
    sys.exit("pip shim: only `pip install` of installed packages is supported here")
extras = {"train": ["torch", "transformers", "trl", "datasets"]}
for spec in args[1:]:
    spec = spec.strip("'\"")
    m = re.match(r"^(\./python|python)(\[(\w+)\])?$", spec)
    if m:
        import importlib.util
        need = ["ledgershield"] + extras.get(m.group(3) or "", [])
        for n in need:
            if importlib.util.find_spec(n) is None:
                sys.exit(f"pip shim: {n} (from {spec}) is not installed in this interpreter")
        continue
    name, _, ver = spec.partition("==")
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        sys.exit(f"pip shim: {name} is not installed in this interpreter")
    if ver and have != ver:
        sys.exit(f"pip shim: {name} {have} installed, {ver} asked")
print("Requirement already satisfied:", " ".join(args[1:]))
'''

CARGO_SHIM = r'''#!/usr/bin/env bash
set -euo pipefail
case " $* " in
  *" -p ledgershield "*) ;;
  *) echo "cargo shim: only the ledgershield binary is built here: cargo $*" >&2; exit 1 ;;
esac
if [ "$1" = "build" ]; then
  [ -x "$LEDGERSHIELD_BIN" ] && exit 0
  echo "cargo shim: $LEDGERSHIELD_BIN is not built" >&2; exit 1
fi
if [ "$1" = "run" ]; then
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done
  [ "$#" -gt 0 ] && shift
  exec "$LEDGERSHIELD_BIN" "$@"
fi
echo "cargo shim: unsupported: cargo $*" >&2; exit 1
'''

PRELUDE = r'''__wait_port() {
  for _ in $(seq 1 300); do
    (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on port $1" >&2; return 1
}
'''


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def bash_source(code: str) -> str:
    out = [PRELUDE, "set -eo pipefail"]
    for line in code.splitlines():
        out.append(line)
        bare = line.split(" #")[0].rstrip()
        if bare.endswith("&") and not bare.endswith("&&") and re.search(r"\bserve\b", bare):
            port = re.search(r"--port[ =](\d+)", bare)
            out.append(f"__wait_port {port.group(1) if port else 8000}")
    return "\n".join(out) + "\n"


def setup(work: Path, binary: str, repo: Path) -> dict:
    shims = work / ".shims"
    shims.mkdir(parents=True, exist_ok=True)
    (shims / "cargo").write_text(CARGO_SHIM)
    (shims / "pip").write_text(PIP_SHIM.replace("PYTHON", sys.executable))
    (shims / "ledgershield").write_text(f'#!/bin/sh\nexec "{binary}" "$@"\n')
    (shims / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for f in shims.iterdir():
        f.chmod(0o755)
    (work / "target" / "debug").mkdir(parents=True, exist_ok=True)
    link = work / "target" / "debug" / "ledgershield"
    if not link.exists():
        link.symlink_to(binary)
    if not (work / "python").exists():
        (work / "python").symlink_to(repo / "python")
    env = dict(os.environ)
    env["PATH"] = f"{shims}:{env.get('PATH', '')}"
    env["LEDGERSHIELD_BIN"] = binary
    env["LEDGERSHIELD_PROGRESS"] = "0"
    env.pop("LEDGERSHIELD_DB_PATH", None)
    # A server writes its generated operator key under the home directory: keep it in the scratch.
    env["HOME"] = str(work / "home")
    env.pop("XDG_STATE_HOME", None)
    (work / "home").mkdir(exist_ok=True)
    return env


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    work, repo, binary = Path(spec["work"]), Path(spec["repo"]), spec["binary"]
    if spec.get("netns"):
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    env = setup(work, binary, repo)
    results, groups = [], []
    try:
        for snip in spec["snippets"]:
            t0 = time.monotonic()
            if snip["lang"] == "python":
                path = work / f"snippet_{snip['line']}.py"
                path.write_text(snip["code"])
                argv = [sys.executable, str(path)]
            else:
                path = work / f"snippet_{snip['line']}.sh"
                path.write_text(bash_source(snip["code"]))
                argv = ["bash", str(path)]
            # Output goes to files: a server a block leaves in the background keeps its copy of
            # the block's stdout open, so waiting for the end of a pipe would wait for the server.
            out_path, err_path = path.with_suffix(".out"), path.with_suffix(".err")
            with out_path.open("w") as fo, err_path.open("w") as fe:
                proc = subprocess.Popen(argv, cwd=work, env=env, stdout=fo, stderr=fe, start_new_session=True)
                groups.append(proc.pid)
                try:
                    rc = proc.wait(timeout=snip.get("timeout", 300))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc = -9
            out, err = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
            results.append({"line": snip["line"], "rc": rc, "stdout": out[-2_000_000:], "stderr": err[-8000:],
                            "seconds": round(time.monotonic() - t0, 1)})
            if rc != 0:
                break
    finally:
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
