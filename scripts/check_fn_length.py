#!/usr/bin/env python3
"""Fail on a non-test function over 150 lines (clippy's `too_many_lines`, threshold in
clippy.toml: lines of code, blank and comment lines not counted).

Runs clippy over the workspace's library and binary targets only (test code, `#[cfg(test)]`
modules and tests/ are not compiled there) with every other lint allowed, and compares the
offenders with ALLOWED, which is empty: every function that was over the limit when the check
was added has since been split. The list can only shrink: a new offender fails, and so does a
listed function that is no longer over the limit (remove it from the list).
"""
import json
import subprocess
import sys

# crate-relative file :: function name of a function still to split (none remain).
ALLOWED: set[str] = set()


def offenders():
    cmd = [
        "cargo", "clippy", "--workspace", "--lib", "--bins", "--locked",
        "--message-format=json", "--quiet", "--",
        "-A", "clippy::all", "-W", "clippy::too_many_lines",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    found = set()
    for line in out.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        m = msg.get("message") or {}
        if msg.get("reason") != "compiler-message" or (m.get("code") or {}).get("code") != "clippy::too_many_lines":
            continue
        span = next(s for s in m["spans"] if s["is_primary"])
        text = span["text"][0]["text"] if span["text"] else ""
        name = text.split("fn ", 1)[1].split("(")[0].split("<")[0].strip() if "fn " in text else "?"
        found.add(f"{span['file_name']}::{name} ({m['message'].split('(')[1].split(')')[0]})")
    if out.returncode != 0 and not found:
        sys.stderr.write(out.stderr)
        sys.exit("clippy failed")
    return found


def main():
    found = offenders()
    keys = {f.split(" (")[0] for f in found}
    new = sorted(f for f in found if f.split(" (")[0] not in ALLOWED)
    gone = sorted(ALLOWED - keys)
    for f in sorted(found):
        print(("allowed  " if f.split(" (")[0] in ALLOWED else "NEW      ") + f)
    for g in gone:
        print(f"FIXED    {g}: no longer over the limit; remove it from ALLOWED")
    if new or gone:
        sys.exit(f"{len(new)} new function(s) over 150 lines, {len(gone)} stale allowlist entr(ies)")
    print(f"ok: no new function over 150 lines ({len(found)} allowlisted remain)")


if __name__ == "__main__":
    main()
