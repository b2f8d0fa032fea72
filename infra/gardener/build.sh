#!/usr/bin/env bash
# build.sh OUT_DIR: builds Gardener's resource-manager (the peer the benchmark runs side by
# side with the product, bench/peer.ts) from the version pinned in go.mod/go.sum into
# OUT_DIR, and copies from the module what it runs with: the ManagedResource CRD and the
# example certificate pair its webhook server needs even with every webhook off. Called by
# infra/binaries.ts (ensurePeerBinaries), which owns the cache; only the benchmark asks.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
cd "$(dirname "$0")"
version=$(go list -m -f '{{.Version}}' github.com/gardener/gardener)
# The module's directory is known only once it is downloaded (a cold module cache).
go mod download github.com/gardener/gardener
dir=$(go list -m -f '{{.Dir}}' github.com/gardener/gardener)
[ -d "$dir" ] || { echo "build.sh: github.com/gardener/gardener is not in the module cache" >&2; exit 1; }
mkdir -p "$out/certs"
export CGO_ENABLED=0
# "::step NAME" lines tell infra/binaries.ts which binary is being built (its progress line).
echo "::step gardener-resource-manager"
go build -trimpath -ldflags "-s -w" -o "$out/gardener-resource-manager" github.com/gardener/gardener/cmd/gardener-resource-manager
cp "$dir/example/resource-manager/10-crd-resources.gardener.cloud_managedresources.yaml" "$out/managedresources-crd.yaml"
cp "$dir/example/resource-manager/tls.crt" "$dir/example/resource-manager/tls.key" "$out/certs/"
chmod -R u+w "$out"
printf '{"gardener":"%s"}\n' "$version" > "$out/versions.json"
