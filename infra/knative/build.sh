#!/usr/bin/env bash
# build.sh OUT_DIR: builds the Knative Eventing commands the local runtime runs (the
# ApiServerSource receive adapter; the eventing, channel-based broker and in-memory
# channel controllers; the broker ingress and filter, the in-memory channel dispatcher
# and the PingSource adapter) from the version pinned in go.mod/go.sum into OUT_DIR.
# Called by infra/binaries.ts, which owns the cache.
#
# One change to the source: two listening ports that are constants
# (the controllers' health probes, 8080, and the in-memory channel dispatcher's 8080 and
# 8443) are read from the environment when set. In a cluster each Pod has a network of
# its own; here every process shares the host's, so each needs ports of its own. Nothing
# else differs from the released commands.
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
cd "$(dirname "$0")"
eventing=$(go list -m -f '{{.Version}}' knative.dev/eventing)
# A vendored copy of the modules, in a scratch directory, is patched (files in the module
# cache cannot be replaced).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp go.mod go.sum tools.go "$work/"
# "::step NAME" lines tell infra/binaries.ts which binary is being built (its progress line);
# the first one also vendors the module.
echo "::step apiserver_receive_adapter"
(cd "$work" && go mod vendor)
v=$work/vendor

port_func() { # package name
  printf 'package %s\n\nimport (\n\t"os"\n\t"strconv"\n)\n\n// localPort: the local runtime gives each process ports of its own (infra/knative/build.sh).\nfunc localPort(name string, def int) int {\n\tif p, err := strconv.Atoi(os.Getenv(name)); err == nil {\n\t\treturn p\n\t}\n\treturn def\n}\n' "$1"
}
# patch FILE SED_EXPR: edits a vendored file, failing when the expression changed nothing.
patch() {
  local before; before=$(cat "$1")
  sed -i -E "$2" "$1"
  if [ "$before" = "$(cat "$1")" ]; then echo "build.sh: $1 no longer has what the patch changes" >&2; exit 1; fi
}
patch "$v/knative.dev/pkg/injection/health_check.go" 's/^const HealthCheckDefaultPort = 8080$/var HealthCheckDefaultPort = localPort("KNATIVE_HEALTH_PROBES_PORT", 8080)/'
port_func injection > "$v/knative.dev/pkg/injection/zz_local_ports.go"
d=$v/knative.dev/eventing/pkg/reconciler/inmemorychannel/dispatcher
patch "$d/controller.go" '/^\s+http(s)?Port\s+= [0-9]+$/d'
{ port_func dispatcher; printf '\nvar (\n\thttpPort  = localPort("IMC_DISPATCHER_PORT", 8080)\n\thttpsPort = localPort("IMC_DISPATCHER_PORT_HTTPS", 8443)\n)\n'; } > "$d/zz_local_ports.go"

mkdir -p "$out"
export CGO_ENABLED=0
first=1
for cmd in apiserver_receive_adapter controller mtchannel_broker in_memory/channel_controller \
  in_memory/channel_dispatcher broker/ingress broker/filter mtping webhook; do
  [ $first = 1 ] || echo "::step ${cmd##*/}"
  first=0
  (cd "$work" && go build -mod=vendor -trimpath -ldflags "-s -w" -o "$out/" "knative.dev/eventing/cmd/$cmd")
done
# Knative's own configuration of these parts, which the runtime installs into the KCP.
for d in core channels/in-memory-channel brokers/mt-channel-broker; do
  mkdir -p "$out/config/$d" && cp -r "$(go list -m -f '{{.Dir}}' knative.dev/eventing)/config/$d/." "$out/config/$d/"
done
chmod -R u+w "$out/config"
printf '{"eventing":"%s"}\n' "$eventing" > "$out/versions.json"
