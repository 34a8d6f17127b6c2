#!/usr/bin/env bash
# Runs every test: the Rust workspace (unit, integration, property tests) and the Python
# client/conformance suite against a real server. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test (workspace)"
cargo test --workspace --locked 2>&1

echo "== cargo build (server binary for the Python suite)"
cargo build --locked -p ledgershield 2>&1

if [ -f python/run_tests.sh ]; then
  echo "== python suite (openenv-core client, validator, HTTP flow)"
  LEDGERSHIELD_BIN="$PWD/target/debug/ledgershield" bash python/run_tests.sh
fi
echo "== all tests passed"
