#!/usr/bin/env bash
# Builds kubernetes-sigs/network-policy-api's conformance suite from the Go
# module proxy only, at the version of Tabby's go.mod (the one whose
# ClusterNetworkPolicy CRD manifests/crds holds): hack/cnpconformance (a
# module of its own: the suite's TestConformance with Tabby's features and
# skips) copied under the cache with the suite's base/ manifests beside it,
# then `go test -c`.
#
# The one change to the manifests: the SCTP servers (agnhost porter with
# SERVE_SCTP_PORT_*) are given no SCTP port to serve, so they idle instead
# of exiting on a kernel without SCTP (which would leave every base pod
# unready and fail the whole suite). The SCTP tests are skipped by name.
#
# Output: cnp-conformance.test in $TABBY_KUBE_BIN (default
# ~/.cache/tabby-kube/bin), stamp .cnp-<version>. Prints the binary last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NPAPI=$(awk '$1 == "require" && $2 == "sigs.k8s.io/network-policy-api" {print $3} $1 == "sigs.k8s.io/network-policy-api" {print $2}' "$root/go.mod" | head -1)
CACHE=${TABBY_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tabby-kube}
BIN=${TABBY_KUBE_BIN:-$CACHE/bin}
out="$BIN/cnp-conformance.test"
stamp="$BIN/.cnp-$NPAPI-$(cat "$root/hack/cnpconformance/"* | sha256sum | cut -c1-12)"
if [[ -f $stamp && -x $out ]]; then
	echo "$out"
	exit 0
fi
work="$CACHE/cnp-conformance"
rm -rf "$work"
mkdir -p "$BIN" "$work"
cp "$root/hack/cnpconformance/"* "$work/"
cd "$work"
sed -i "s|^require sigs.k8s.io/network-policy-api .*|require sigs.k8s.io/network-policy-api $NPAPI|" go.mod
go mod download "sigs.k8s.io/network-policy-api@$NPAPI"
upstream="$(go env GOMODCACHE)/sigs.k8s.io/network-policy-api@$NPAPI"
cp -r "$upstream/conformance/base" .
chmod -R u+w base
grep -rl SERVE_SCTP_PORT_ base | xargs -r sed -i 's/SERVE_SCTP_PORT_/UNSERVED_SCTP_PORT_/g'
go mod tidy
CGO_ENABLED=0 go test -c -vet=off -o "$out" .
rm -f "$BIN"/.cnp-*
touch "$stamp"
echo "$out"
