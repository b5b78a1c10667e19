#!/usr/bin/env bash
# Every integration test against a real control plane, then a check that the run left nothing
# behind: no namespace or cluster-scoped object that was not there before (the CRDs the
# harness installs stay, as an installation's would) and no process of the kinds the tests
# start.
#
#   tests/real-server.sh [TEST FILTER…]     (make test-real)
#
# The cluster: TEST_KUBECONFIG when set (any cluster; nothing is started or stopped), else a
# kube-local installation in KUBE_LOCAL_HOME (default /var/tmp/kube-local: kube-apiserver and
# kube-controller-manager v1.28 with etcd, README "Tests on a real kube-apiserver"), started
# if it is not running and stopped afterwards if this started it. kubectl comes from
# kube-local, else from `make setup` (target/venv), else from PATH.
# REAL_SERVER_SETTLE (default 180) is how many seconds deletions get to finish.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
home=${KUBE_LOCAL_HOME:-/var/tmp/kube-local}
settle=${REAL_SERVER_SETTLE:-180}

workdir=$(mktemp -d)
started=""
cleanup() {
  if [ -n "$started" ]; then "$home/stop.sh" || true; fi
  rm -rf "$workdir"
}
trap cleanup EXIT

if [ -n "${TEST_KUBECONFIG:-}" ]; then
  kubeconfig=$TEST_KUBECONFIG
elif [ -x "$home/start.sh" ]; then
  kubeconfig=$home/admin.kubeconfig
  if ! "$home/status.sh" >/dev/null 2>&1; then
    "$home/start.sh"
    started=yes
  fi
else
  cat >&2 <<EOF
No cluster to run on: set TEST_KUBECONFIG to a cluster's kubeconfig (its user must be able to
create CRDs, namespaces and cluster RBAC), or KUBE_LOCAL_HOME to a kube-local installation
(none in $home; README, "Tests on a real kube-apiserver").
EOF
  exit 1
fi

kubectl_binary=kubectl
for candidate in "$home/envtest/kubectl" target/venv/bin/kubectl; do
  if [ -x "$candidate" ]; then
    kubectl_binary=$candidate
    break
  fi
done
kubectl() { "$kubectl_binary" --kubeconfig "$kubeconfig" "$@"; }
# Every namespace and cluster-scoped object, by kind and name; the harness's CRDs (and the
# APIServices the aggregator registers for their groups) are left out.
snapshot() {
  local kinds
  kinds=$(kubectl api-resources --namespaced=false --verbs=list,delete -o name | paste -sd, -)
  kubectl get "$kinds" -o name | grep -Ev '(kustomize|source)\.toolkit\.fluxcd\.io$' | sort
}
# The processes the tests start, by pid and command line.
processes() {
  ps -eo pid=,args= | grep -E 'git-daemon|git daemon|moto_server|bao server|gpg-agent|kustomize-controller run' \
    | grep -v grep | sort || true
}

snapshot >"$workdir/objects.before"
processes >"$workdir/processes.before"
$CARGO test --quiet --test integration --no-run
status=0
TEST_KUBECONFIG=$kubeconfig $CARGO test --test integration -- "$@" || status=$?

# Deletions finish asynchronously (namespaces are emptied by the controller-manager).
deadline=$((SECONDS + settle))
while :; do
  snapshot >"$workdir/objects.after"
  comm -13 "$workdir/objects.before" "$workdir/objects.after" >"$workdir/objects.left"
  [ ! -s "$workdir/objects.left" ] && break
  [ "$SECONDS" -ge "$deadline" ] && break
  sleep 2
done
processes >"$workdir/processes.after"
comm -13 "$workdir/processes.before" "$workdir/processes.after" >"$workdir/processes.left"

if [ -s "$workdir/objects.left" ]; then
  echo "left on the cluster after ${settle} s:" >&2
  sed 's/^/  /' "$workdir/objects.left" >&2
  status=1
fi
if [ -s "$workdir/processes.left" ]; then
  echo "processes left running:" >&2
  sed 's/^/  /' "$workdir/processes.left" >&2
  status=1
fi
[ "$status" -eq 0 ] && echo "real-server run: nothing left behind"
exit "$status"
