#!/usr/bin/env bash
# build.sh OUT_DIR: builds kube-apiserver, kube-controller-manager and etcd from the
# versions pinned in go.mod/go.sum into OUT_DIR, with version ldflags so that /version
# reports the real release. Called by infra/binaries.ts, which owns the cache.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
cd "$(dirname "$0")"
kube=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcd=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
major=${kube#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cv=k8s.io/component-base/version
kflags="-s -w -X $cv.gitVersion=$kube -X $cv.gitMajor=$major -X $cv.gitMinor=$minor -X $cv.gitTreeState=clean -X $cv.buildDate=$date"
kflags="$kflags -X k8s.io/client-go/pkg/version.gitVersion=$kube -X k8s.io/client-go/pkg/version.gitMajor=$major -X k8s.io/client-go/pkg/version.gitMinor=$minor"
mkdir -p "$out"
export CGO_ENABLED=0
# "::step NAME" lines tell infra/binaries.ts which binary is being built (its progress line).
echo "::step kube-apiserver"
go build -trimpath -ldflags "$kflags" -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "::step kube-controller-manager"
go build -trimpath -ldflags "$kflags" -o "$out/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
echo "::step etcd"
go build -trimpath -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3
printf '{"kubernetes":"%s","etcd":"%s"}\n' "$kube" "$etcd" > "$out/versions.json"
