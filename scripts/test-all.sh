#!/usr/bin/env bash
# Runs every test: the Rust workspace (unit, integration, property tests) and the Python
# client/conformance suite against a real server. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ci-lint.sh

# One build of every target with one feature set, so the test run and the server binary used
# by the Python suite share it instead of compiling the dependency graph twice.
echo "== cargo build (workspace, all targets)"
cargo build --workspace --all-targets --locked 2>&1

echo "== cargo test (workspace)"
cargo test --workspace --locked 2>&1

if [ -f python/run_tests.sh ]; then
  echo "== python suite (openenv-core client, validator, HTTP flow)"
  LEDGERSHIELD_BIN="$PWD/target/debug/ledgershield" bash python/run_tests.sh
fi
echo "== deployment: store tests on PostgreSQL too, Kubernetes manifests, replicas behind nginx, container image"
LEDGERSHIELD_BIN="$PWD/target/debug/ledgershield" bash scripts/ci-postgres.sh
bash scripts/ci-k8s.sh
LEDGERSHIELD_BIN="$PWD/target/debug/ledgershield" bash scripts/ci-nginx-replicas.sh
LEDGERSHIELD_BIN="$PWD/target/debug/ledgershield" bash scripts/ci-container.sh
echo "== browser tests (workbench)"
LEDGERSHIELD_BIN="$PWD/target/debug/ledgershield" bash scripts/ci-ui.sh
echo "== training smoke" && LEDGERSHIELD_BIN="$PWD/target/debug/ledgershield" bash scripts/ci-training-smoke.sh
echo "== all tests passed"
