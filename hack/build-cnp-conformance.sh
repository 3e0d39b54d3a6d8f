#!/usr/bin/env bash
# Builds kubernetes-sigs/network-policy-api's conformance suite from the Go
# module proxy only, at the version of Tabby's go.mod (the one whose
# ClusterNetworkPolicy CRD manifests/crds holds): hack/cnpconformance (a
# module of its own: the suite's TestConformance with Tabby's features and
# skips) copied under the cache with the suite's base/ manifests beside it,
# then `go test -c`.
#
# Two changes to the suite, for kernels without SCTP, both only when
# CNP_NO_SCTP is set at run time (hack/e2e-cnp.sh sets it to the reason):
# the SCTP servers (agnhost porter with SERVE_SCTP_PORT_*) are given no
# SCTP port to serve (base/manifests-no-sctp.yaml), so they idle instead of exiting (which would leave
# every base pod unready and fail the whole suite), and the suite's
# PokeServer logs "SCTP poke not run" and returns for an SCTP poke instead
# of failing (tests mixing TCP, UDP and SCTP pokes run their TCP and UDP
# ones). The tests of SCTP alone are skipped by name (cnpconformance).
#
# Output: cnp-conformance.test in $TABBY_KUBE_BIN (default
# ~/.cache/tabby-kube/bin), stamp .cnp-<version>. Prints the binary last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
NPAPI=$(awk '$1 == "require" && $2 == "sigs.k8s.io/network-policy-api" {print $3} $1 == "sigs.k8s.io/network-policy-api" {print $2}' "$root/go.mod" | head -1)
CACHE=${TABBY_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tabby-kube}
BIN=${TABBY_KUBE_BIN:-$CACHE/bin}
out="$BIN/cnp-conformance.test"
stamp="$BIN/.cnp-$NPAPI-$(cat "$root/hack/cnpconformance/"* "$0" | sha256sum | cut -c1-12)"
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
sed 's/SERVE_SCTP_PORT_/UNSERVED_SCTP_PORT_/' base/manifests.yaml >base/manifests-no-sctp.yaml
cp -r "$upstream" npapi
chmod -R u+w npapi
helper=npapi/conformance/utils/kubernetes/helper.go
sed -i -e 's/^\t"net"$/\t"net"\n\t"os"/' -e '/^func PokeServer(/a\
\tif why := os.Getenv("CNP_NO_SCTP"); protocol == "sctp" \&\& why != "" {\
\t\tt.Logf("SCTP poke not run (%s): %s/%s -> %s:%d", why, clientNamespace, clientPod, targetHost, targetPort)\
\t\treturn\
\t}' "$helper"
grep -q CNP_NO_SCTP "$helper"
printf '\nreplace sigs.k8s.io/network-policy-api => ./npapi\n' >>go.mod
go mod tidy
CGO_ENABLED=0 go test -c -vet=off -o "$out" .
rm -f "$BIN"/.cnp-*
touch "$stamp"
echo "$out"
