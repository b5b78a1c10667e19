#!/usr/bin/env bash
# End-to-end scenarios (`make e2e`).
#
# With KUBECONFIG pointing at a cluster (and E2E_KIND unset), the scenarios run there against
# the controller already installed, or install the chart when E2E_INSTALL=1 (set IMAGE to the
# image to use). Without KUBECONFIG, a kind cluster is created where a Docker engine and the
# kind CLI exist: the image is built and loaded, Flux's source-controller and this chart are
# installed, and the scenarios run. Needs kubectl, helm and the flux CLI (for source-controller);
# network access for the images and for the podinfo repository the scenarios sync.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-kustomize-controller:e2e}
NAMESPACE=${NAMESPACE:-flux-system}
CLUSTER=${E2E_CLUSTER:-kc-e2e}
need() { command -v "$1" >/dev/null 2>&1 || { echo "e2e: $1 is required" >&2; exit 2; }; }
need kubectl

if [ -z "${KUBECONFIG:-}" ] || [ -n "${E2E_KIND:-}" ]; then
  need docker; need kind; need helm
  docker info >/dev/null 2>&1 || { echo "e2e: no Docker engine; set KUBECONFIG to use an existing cluster" >&2; exit 2; }
  kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --wait 120s
  kubectl config use-context "kind-$CLUSTER"
  docker build -t "$IMAGE" .
  kind load docker-image "$IMAGE" --name "$CLUSTER"
  E2E_INSTALL=1
fi

if [ "${E2E_INSTALL:-}" = 1 ]; then
  need helm; need flux
  # Flux's source-controller with its RBAC, from the flux CLI (pin FLUX_VERSION for repeatability).
  flux install --namespace="$NAMESPACE" --components=source-controller ${FLUX_VERSION:+--version="$FLUX_VERSION"}
  helm upgrade --install kustomize-controller charts/kustomize-controller -n "$NAMESPACE" \
    --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=IfNotPresent --wait
fi

exec bash e2e/scenarios.sh "$NAMESPACE"
