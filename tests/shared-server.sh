#!/usr/bin/env bash
# Runs the cluster tests the way they run against a real cluster: one in-process API server
# in its own process, shared by every test through TEST_KUBECONFIG.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
workdir=$(mktemp -d)
kubeconfig="$workdir/kubeconfig"
cleanup() {
  # The server runs in its own process group (cargo and the test binary it starts): killing
  # cargo alone left the test binary serving, orphaned, after every run.
  [ -n "${server_pid:-}" ] && kill -- "-$server_pid" 2>/dev/null || true
  rm -rf "$workdir"
}
trap cleanup EXIT
$CARGO test --quiet --test integration --no-run
KC_TESTSERVER_KUBECONFIG="$kubeconfig" setsid $CARGO test --quiet --test integration \
  serve_test_apiserver -- --ignored --exact apiserver::serve_test_apiserver >"$workdir/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
  [ -f "$kubeconfig" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$workdir/server.log"; exit 1; }
  sleep 0.1
done
[ -f "$kubeconfig" ] || { echo "the test API server did not start"; cat "$workdir/server.log"; exit 1; }
TEST_KUBECONFIG="$kubeconfig" $CARGO test --quiet --test integration apiserver::
# …and left nothing there.
TEST_KUBECONFIG="$kubeconfig" $CARGO test --quiet --test integration -- --ignored --exact \
  apiserver::the_shared_server_holds_nothing_of_the_tests_that_ran
