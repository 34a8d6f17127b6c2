#!/usr/bin/env bash
# Lint habits CI enforces: formatting, clippy with warnings as errors on every target, and no
# declared-but-unused dependency. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (workspace, all targets, -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings 2>&1

echo "== unused dependencies"
python3 scripts/unused_deps.py

echo "== curated fixtures reproduce from their authoring script"
python3 fixtures/tools/build_controlbench.py --check

echo "== no new function over 150 lines (clippy too_many_lines, shrinking allowlist)"
python3 scripts/check_fn_length.py

echo "== no module cycles (shrinking allowlist)"
python3 scripts/check_module_cycles.py
