#!/usr/bin/env bash
# build.sh OUT_DIR: builds the Knative Eventing commands the local runtime runs
# (the ApiServerSource receive adapter) from the version pinned in go.mod/go.sum into
# OUT_DIR. Called by infra/binaries.ts, which owns the cache.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
cd "$(dirname "$0")"
eventing=$(go list -m -f '{{.Version}}' knative.dev/eventing)
mkdir -p "$out"
export CGO_ENABLED=0
go build -trimpath -ldflags "-s -w" -o "$out/apiserver_receive_adapter" knative.dev/eventing/cmd/apiserver_receive_adapter
printf '{"eventing":"%s"}\n' "$eventing" > "$out/versions.json"
