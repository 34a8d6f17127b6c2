#!/usr/bin/env bash
# Validates the Kubernetes manifests in deploy/kubernetes offline: every object against the
# Kubernetes API schemas shipped by kubernetes-validate (PyPI; strict: unknown fields fail), then
# what ties them together (scripts/k8s_check.py). `kubectl --dry-run=client` needs an API server
# for its schemas, which CI does not have.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${K8S_VENV:-target/ci-k8s-venv}"
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --no-cache-dir "kubernetes-validate==1.37.0"
fi
"$VENV/bin/kubernetes-validate" --strict --quiet -k 1.37.0 deploy/kubernetes/*.yaml
"$VENV/bin/python" scripts/k8s_check.py deploy/kubernetes
