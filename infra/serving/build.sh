#!/usr/bin/env bash
# build.sh OUT_DIR: builds Knative Serving's queue-proxy (cmd/queue) from the version pinned
# in go.mod/go.sum into OUT_DIR, with Serving's CRDs and the ClusterRoles Eventing aggregates.
# Called by infra/binaries.ts.
#
# One change to the source: queue-proxy's admin (8022) and autoscaler metrics (9090)
# ports are constants; here every replica shares the host's network, so each reads its
# own from the environment when set (QUEUE_ADMIN_PORT, QUEUE_METRICS_PORT).
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
cd "$(dirname "$0")"
serving=$(go list -m -f '{{.Version}}' knative.dev/serving)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp go.mod go.sum tools.go "$work/"
echo "::step queue-proxy" # "::step NAME" lines are infra/binaries.ts's progress line
(cd "$work" && go mod vendor)
q=$work/vendor/knative.dev/serving/pkg/queue/sharedmain
patch() { # FILE SED_EXPR: fails when the expression changed nothing
  local before; before=$(cat "$1")
  sed -i -E "$2" "$1"
  if [ "$before" = "$(cat "$1")" ]; then echo "build.sh: $1 no longer has what the patch changes" >&2; exit 1; fi
}
patch "$q/main.go" 's/strconv\.Itoa\(networking\.QueueAdminPort\)/strconv.Itoa(localPort("QUEUE_ADMIN_PORT", networking.QueueAdminPort))/'
patch "$q/servers.go" 's/strconv\.Itoa\(networking\.AutoscalingQueueMetricsPort\)/strconv.Itoa(localPort("QUEUE_METRICS_PORT", networking.AutoscalingQueueMetricsPort))/'
printf 'package sharedmain\n\nimport (\n\t"os"\n\t"strconv"\n)\n\n// localPort: the local runtime gives each process ports of its own (infra/serving/build.sh).\nfunc localPort(name string, def int) int {\n\tif p, err := strconv.Atoi(os.Getenv(name)); err == nil {\n\t\treturn p\n\t}\n\treturn def\n}\n' > "$q/zz_local_ports.go"
mkdir -p "$out/config"
export CGO_ENABLED=0
(cd "$work" && go build -mod=vendor -trimpath -ldflags "-s -w" -o "$out/queue" knative.dev/serving/cmd/queue)
src=$(go list -m -f '{{.Dir}}' knative.dev/serving)/config/core
cp "$src/300-resources/"{service,configuration,revision,route}.yaml "$out/config/"
# Serving's ClusterRoles that Eventing's aggregate over (SinkBinding patches a Service; the
# addressable resolver reads one).
mkdir -p "$out/config/roles"
cp "$src/200-roles/"{podspecable-bindings-clusterrole,addressable-resolvers-clusterrole}.yaml "$out/config/roles/"
chmod -R u+w "$out/config"
printf '{"serving":"%s"}\n' "$serving" > "$out/versions.json"
