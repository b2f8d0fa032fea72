#!/usr/bin/env bash
# build.sh OUT_DIR: builds KWOK from the version pinned in go.mod/go.sum and kube-scheduler
# from ../kube's module (the API server's version and build cache) into OUT_DIR, and copies
# the KWOK stages the local SKRs use from the module. Called by infra/binaries.ts, which
# owns the cache.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
cd "$(dirname "$0")"
kwok=$(go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
# The module's directory is known only once it is downloaded (a cold module cache).
go mod download sigs.k8s.io/kwok
dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
[ -d "$dir" ] || { echo "build.sh: sigs.k8s.io/kwok is not in the module cache" >&2; exit 1; }
mkdir -p "$out/stages"
export CGO_ENABLED=0
# "::step NAME" lines tell infra/binaries.ts which binary is being built (its progress line).
echo "::step kwok"
go build -trimpath -ldflags "-s -w" -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok
# Fast stages: a Node is Ready at once, a Pod Running and Ready, a Job's Pod Succeeded; a Pod
# labelled pod-container-running-failed.stage.kwok.x-k8s.io=true fails (chaos).
for s in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete pod/chaos/pod-container-running-failed; do
  { cat "$dir/kustomize/stage/$s.yaml"; echo '---'; } >> "$out/stages/stages.yaml"
done
(
  cd ../kube
  kube=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
  major=${kube#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
  cv=k8s.io/component-base/version
  echo "::step kube-scheduler"
  go build -trimpath -ldflags "-s -w -X $cv.gitVersion=$kube -X $cv.gitMajor=$major -X $cv.gitMinor=$minor -X $cv.gitTreeState=clean" \
    -o "$out/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
  printf '{"kwok":"%s","kubernetes":"%s"}\n' "$kwok" "$kube" > "$out/versions.json"
)
