#!/usr/bin/env bash
# CI entry point for the Python conformance tests.
#
# Creates (or reuses) a virtual environment at $VENV (default: <repo>/.venv), installs the pinned
# openenv-core, this package (`pip install ./python`: maturin compiles the native extension
# crates/ls-py with cargo, so the Rust toolchain must be present), pytest, requests and
# prometheus_client (the reference parsers the /metrics format test reads with), PettingZoo (its API
# tests run against ledgershield.pettingzoo; the SB3 tests need torch and run in
# scripts/ci-training-smoke.sh), builds the server binary if it is missing and runs pytest. Exits non-zero on any failure, including "no
# tests collected" (pytest exit 5).
#
#   LEDGERSHIELD_BIN  server binary (default: <repo>/target/debug/ledgershield)
#   VENV              virtual environment directory
#   PYTHON            interpreter used to create the venv (default: python3)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
OPENENV_CORE_VERSION="0.3.0"
VENV="${VENV:-$REPO/.venv}"
PYTHON="${PYTHON:-python3}"
export LEDGERSHIELD_BIN="${LEDGERSHIELD_BIN:-$REPO/target/debug/ledgershield}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    "openenv-core==$OPENENV_CORE_VERSION" "pytest>=7" "requests>=2.28" "prometheus_client>=0.20" "pettingzoo==1.27.0"
wheel_start=$(date +%s)
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir "$HERE"
echo "python package with its native extension built and installed in $(( $(date +%s) - wheel_start )) s" >&2

if [ ! -x "$LEDGERSHIELD_BIN" ]; then
    echo "building ledgershield (binary not found at $LEDGERSHIELD_BIN)" >&2
    (cd "$REPO" && cargo build -p ledgershield)
fi

# Run from tests/: the source tree's package has no compiled extension, so neither pytest nor a
# test's `python -c` subprocess may find it ahead of the installed package (the working directory
# comes first on their sys.path; `python -m pytest` would add it too, hence the pytest script).
cd "$HERE/tests"
set +e
"$VENV/bin/pytest" -q -p no:cacheprovider . "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests; failing" >&2
    exit 1
fi
exit "$rc"
