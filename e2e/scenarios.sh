#!/usr/bin/env bash
# The scenarios, against the current kubectl context: a Kustomization of podinfo becomes
# Ready with an inventory, a path change prunes, kubectl drift is reverted, suspend holds,
# and deletion garbage-collects.
set -euo pipefail
NAMESPACE=${1:-flux-system}
TEST_NS=kc-e2e-$RANDOM
ready() { kubectl -n "$NAMESPACE" wait kustomization/"$1" --for=condition=Ready --timeout="${2:-180s}"; }
step() { echo "== $*"; }

cleanup() { kubectl -n "$NAMESPACE" delete kustomization podinfo-e2e --ignore-not-found --wait=true || true; kubectl delete namespace "$TEST_NS" --ignore-not-found || true; }
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
kubectl -n "$TEST_NS" scale deployment podinfo --replicas=5
kubectl -n "$NAMESPACE" annotate --overwrite kustomization podinfo-e2e reconcile.fluxcd.io/requestedAt="$(date +%s)"
for _ in $(seq 60); do
  replicas=$(kubectl -n "$TEST_NS" get deployment podinfo -o jsonpath='{.spec.replicas}')
  [ "$replicas" != 5 ] && break
  sleep 2
done
[ "$replicas" != 5 ] || { echo "drift was not reverted" >&2; exit 1; }

step "suspend holds"
kubectl -n "$NAMESPACE" patch kustomization podinfo-e2e --type=merge -p '{"spec":{"suspend":true}}'
kubectl -n "$TEST_NS" delete hpa podinfo --ignore-not-found
sleep 10
! kubectl -n "$TEST_NS" get hpa podinfo >/dev/null 2>&1
kubectl -n "$NAMESPACE" patch kustomization podinfo-e2e --type=merge -p '{"spec":{"suspend":false}}'
ready podinfo-e2e

step "deletion prunes"
kubectl -n "$NAMESPACE" delete kustomization podinfo-e2e --wait=true --timeout=180s
for _ in $(seq 60); do
  kubectl -n "$TEST_NS" get deployment podinfo >/dev/null 2>&1 || break
  sleep 2
done
! kubectl -n "$TEST_NS" get deployment podinfo >/dev/null 2>&1
echo "e2e: all scenarios passed"
