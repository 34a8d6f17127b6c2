#!/usr/bin/env bash
# Lint habits CI enforces: formatting, one clippy pass with warnings as errors on every target,
# and no declared-but-unused dependency. Exits non-zero on the first failure.
#
# The structure checks (module cycles, crate dependency direction, function length) are not
# here: they are the `ls-tidy` crate's tests, which parse the sources with `syn` and run in
# `cargo test --workspace` (`cargo test -p ls-tidy` alone takes seconds once built), so CI
# compiles and lints the workspace once.
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
