#!/usr/bin/env bash
# Builds the real Kubernetes API server, kubectl and etcd that the
# Kubernetes-datastore tests run against, from the Go module proxy only:
# k8s.io/kubernetes with each staging module pinned to its published
# version, and etcd as a tiny wrapper around etcdmain.Main (its own go.mod
# has replace directives, so `go install` of it is refused).
#
# Usage: hack/build-kube-binaries.sh [all|etcd]
#   all (default): etcd, kube-apiserver and kubectl.
#   etcd: etcd only (what the lab's default etcd datastore needs; ~1-2 min
#   cold instead of ~8-40).
#
# Output: $TABBY_KUBE_BIN (default ~/.cache/tabby-kube/bin) with
# kube-apiserver, kubectl, etcd; the stamp .built-<kube>-<etcd> once all
# three are there (.etcd-<etcd> once etcd is). Cold: ~8 min on 2 cores;
# warm: seconds. Prints the bin folder on its last line.
set -euo pipefail
what=${1:-all}
case $what in
all | etcd) ;;
*)
	echo "usage: $0 [all|etcd]" >&2
	exit 2
	;;
esac
KVER=${KVER:-1.37.2}
ETCDVER=${ETCDVER:-v3.7.3}
STAGING_VER=0.${KVER#1.}
CACHE=${TABBY_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tabby-kube}
BIN=${TABBY_KUBE_BIN:-$CACHE/bin}
mkdir -p "$BIN" "$CACHE/kube" "$CACHE/etcd"

stamp="$BIN/.built-$KVER-$ETCDVER"
etcd_stamp="$BIN/.etcd-$ETCDVER"
if [[ -f $stamp && -x $BIN/kube-apiserver && -x $BIN/kubectl && -x $BIN/etcd ]]; then
	echo "$BIN"
	exit 0
fi

if [[ ! -x $BIN/etcd || ! (-f $etcd_stamp || -f $stamp) ]]; then
	cd "$CACHE/etcd"
	cat >main.go <<'GO'
// Command etcd is upstream etcd's server main, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
	printf 'module tabby.local/etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCDVER" >go.mod
	go mod tidy
	go build -ldflags "-s -w" -o "$BIN/etcd" .
	touch "$etcd_stamp"
fi
if [[ $what == etcd ]]; then
	echo "$BIN"
	exit 0
fi

cd "$CACHE/kube"
go mod download "k8s.io/kubernetes@v$KVER"
upstream_mod="$(go env GOMODCACHE)/k8s.io/kubernetes@v$KVER/go.mod"
{
	printf 'module tabby.local/kubebuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KVER"
	# k8s.io/kubernetes points its staging modules at ./staging; pin each to
	# the published version instead. sample-* are not needed (nor served).
	sed -n '/^replace (/,/^)/p' "$upstream_mod" |
		awk '/=> \.\/staging/ {print $1}' |
		grep -v -e '^k8s.io/sample-controller$' -e '^k8s.io/sample-cli-plugin$' |
		while read -r m; do printf '\t%s => %s v%s\n' "$m" "$m" "$STAGING_VER"; done
	printf ')\n'
} >go.mod
cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
go mod tidy
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=v$KVER -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(cut -d. -f2 <<<"$KVER") -X $vpkg.gitTreeState=clean"
go build -ldflags "$ldflags" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -ldflags "$ldflags" -o "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl

touch "$stamp"
echo "$BIN"
