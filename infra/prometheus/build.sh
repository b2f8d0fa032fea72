#!/usr/bin/env bash
# build.sh OUT_DIR: builds Prometheus from the version pinned in go.mod/go.sum into OUT_DIR
# (without its web UI's assets: the tests use its HTTP API). Called by infra/binaries.ts
# (ensurePrometheusBinaries), which owns the cache.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
cd "$(dirname "$0")"
version=$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
mkdir -p "$out"
export CGO_ENABLED=0
# "::step NAME" lines tell infra/binaries.ts which binary is being built (its progress line).
echo "::step prometheus"
go build -trimpath -ldflags "-s -w" -o "$out/prometheus" github.com/prometheus/prometheus/cmd/prometheus
printf '{"prometheus":"%s"}\n' "$version" > "$out/versions.json"
