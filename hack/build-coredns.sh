#!/usr/bin/env bash
# Builds CoreDNS, the cluster DNS of `make e2e-network` (and the /coredns
# upstream's agnhost image holds), from the Go module proxy only: a main of
# its own importing coremain and the plugins a Kubernetes cluster's Corefile
# uses (kubernetes, forward, cache, errors, health, ready, loop, reload,
# loadbalance, log) and the hosts plugin the DNS e2e's own CoreDNS pod uses,
# so none of the cloud plugins' modules are downloaded. Static
# (CGO_ENABLED=0): it runs inside the cluster's images.
#
# Output: $TABBY_KUBE_BIN/coredns (default ~/.cache/tabby-kube/bin), module
# folder $CACHE/coredns, stamp .coredns-<version>. ~2-4 min cold on 2
# cores, seconds warm. Prints the bin folder on its last line.
set -euo pipefail
COREDNS_VER=${COREDNS_VER:-v1.15.0}
CACHE=${TABBY_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tabby-kube}
BIN=${TABBY_KUBE_BIN:-$CACHE/bin}
stamp="$BIN/.coredns-$COREDNS_VER"
if [[ -f $stamp && -x $BIN/coredns ]]; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$BIN" "$CACHE/coredns"
cd "$CACHE/coredns"
plugins=(cache errors forward health hosts kubernetes loadbalance log loop ready reload)
{
	printf '// Command coredns is upstream CoreDNS with the plugins a cluster DNS uses.\npackage main\n\nimport (\n'
	for p in "${plugins[@]}"; do printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$p"; done
	printf '\n\t"github.com/coredns/coredns/coremain"\n)\n\nfunc main() { coremain.Run() }\n'
} >main.go
printf 'module tabby.local/corednsbuild\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VER" >go.mod
go mod tidy
CGO_ENABLED=0 go build -ldflags "-s -w" -o "$BIN/coredns" .
touch "$stamp"
echo "$BIN"
