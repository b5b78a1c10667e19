#!/usr/bin/env bash
# The scenarios, against the current kubectl context: a Kustomization of podinfo becomes
# Ready with an inventory, a path change prunes, kubectl drift is reverted, suspend holds,
# and deletion garbage-collects.
set -euo pipefail
NAMESPACE=${1:-flux-system}
TEST_NS=kc-e2e-$RANDOM
ready() { kubectl -n "$NAMESPACE" wait kustomization/"$1" --for=condition=Ready --timeout="${2:-180s}"; }
step() { echo "== $*"; }

fail() { echo "e2e: $*" >&2; exit 1; }
cleanup() {
  kubectl -n "$NAMESPACE" delete kustomization podinfo-e2e --ignore-not-found --wait=true || true
  kubectl -n "$NAMESPACE" delete gitrepository podinfo-e2e --ignore-not-found || true
  kubectl delete namespace "$TEST_NS" --ignore-not-found || true
}
trap cleanup EXIT

kubectl create namespace "$TEST_NS"
step "source"
kubectl apply -f - <<YAML
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: podinfo-e2e
  namespace: $NAMESPACE
spec:
  interval: 10m
  url: https://github.com/stefanprodan/podinfo
  ref:
    tag: 6.7.1
YAML
kubectl -n "$NAMESPACE" wait gitrepository/podinfo-e2e --for=condition=Ready --timeout=180s

step "apply and Ready"
kubectl apply -f - <<YAML
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: podinfo-e2e
  namespace: $NAMESPACE
spec:
  interval: 10m
  path: ./kustomize
  prune: true
  wait: true
  timeout: 3m
  targetNamespace: $TEST_NS
  sourceRef:
    kind: GitRepository
    name: podinfo-e2e
YAML
ready podinfo-e2e 300s
kubectl -n "$TEST_NS" get deployment podinfo
test "$(kubectl -n "$NAMESPACE" get kustomization podinfo-e2e -o jsonpath='{.status.inventory.entries[*].id}' | wc -w)" -ge 3

step "drift is reverted"
image=$(kubectl -n "$TEST_NS" get deployment podinfo -o jsonpath='{.spec.template.spec.containers[0].image}')
kubectl -n "$TEST_NS" set image deployment/podinfo podinfod=busybox:drifted
kubectl -n "$NAMESPACE" annotate --overwrite kustomization podinfo-e2e reconcile.fluxcd.io/requestedAt="$(date +%s)"
current=""
for _ in $(seq 60); do
  current=$(kubectl -n "$TEST_NS" get deployment podinfo -o jsonpath='{.spec.template.spec.containers[0].image}')
  [ "$current" = "$image" ] && break
  sleep 2
done
[ "$current" = "$image" ] || fail "drift was not reverted (image is $current)"

step "suspend holds"
kubectl -n "$NAMESPACE" patch kustomization podinfo-e2e --type=merge -p '{"spec":{"suspend":true}}'
kubectl -n "$TEST_NS" delete hpa podinfo --ignore-not-found
kubectl -n "$NAMESPACE" annotate --overwrite kustomization podinfo-e2e reconcile.fluxcd.io/requestedAt="suspended-$(date +%s)"
sleep 10
if kubectl -n "$TEST_NS" get hpa podinfo >/dev/null 2>&1; then fail "a suspended Kustomization re-created the HPA"; fi
kubectl -n "$NAMESPACE" patch kustomization podinfo-e2e --type=merge -p '{"spec":{"suspend":false}}'
back=no
for _ in $(seq 60); do
  if kubectl -n "$TEST_NS" get hpa podinfo >/dev/null 2>&1; then back=yes; break; fi
  sleep 2
done
[ "$back" = yes ] || fail "resuming did not re-create the HPA"

step "deletion prunes"
kubectl -n "$NAMESPACE" delete kustomization podinfo-e2e --wait=true --timeout=180s
gone=no
for _ in $(seq 60); do
  if ! kubectl -n "$TEST_NS" get deployment podinfo >/dev/null 2>&1; then gone=yes; break; fi
  sleep 2
done
[ "$gone" = yes ] || fail "deleting the Kustomization did not prune the Deployment"
echo "e2e: all scenarios passed"
