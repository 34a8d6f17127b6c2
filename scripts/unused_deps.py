#!/usr/bin/env python3
"""Declared-but-unused dependency check for the workspace (what cargo-machete does, without an
install): for every member crate and every dependency it declares (normal, dev, build), look for
the dependency's library name (renames and `[lib] name`s resolved through `cargo metadata`) in
the crate's Rust sources. Exits 1 and lists the unused ones."""
import json
import pathlib
import re
import subprocess
import sys

meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--locked"], check=True, capture_output=True, text=True).stdout)
by_name = {}
for p in meta["packages"]:
    for t in p["targets"]:
        if any(k in ("lib", "rlib", "proc-macro", "dylib", "cdylib") for k in t["kind"]):
            by_name.setdefault(p["name"], set()).add(t["name"].replace("-", "_"))

members = set(meta["workspace_members"])
unused = []
for p in meta["packages"]:
    if p["id"] not in members:
        continue
    root = pathlib.Path(p["manifest_path"]).parent
    sources = (f.read_text(errors="replace") for f in root.rglob("*.rs") if "target" not in f.parts)
    # Comments do not use a crate (a line comment runs to the end of the line).
    text = "\n".join(re.sub(r"//.*", "", s) for s in sources)
    for d in p["dependencies"]:
        names = {d["rename"].replace("-", "_")} if d.get("rename") else by_name.get(d["name"], {d["name"].replace("-", "_")})
        if not any(re.search(rf"\b{re.escape(n)}\b", text) for n in names):
            unused.append(f"{p['name']}: {d['name']} ({d.get('kind') or 'normal'})")

if unused:
    print("declared but unused dependencies:")
    print("\n".join(f"  {u}" for u in sorted(set(unused))))
    sys.exit(1)
print("no unused dependencies")
