#!/usr/bin/env bash
# Builds the real Kubernetes API server, kubectl and etcd that the
# Kubernetes-datastore tests run against, from the Go module proxy only:
# k8s.io/kubernetes with each staging module pinned to its published
# version, and etcd as a tiny wrapper around etcdmain.Main (its own go.mod
# has replace directives, so `go install` of it is refused).
#
# Usage: hack/build-kube-binaries.sh [all|etcd|node|e2e]
#   all (default): etcd, kube-apiserver and kubectl.
#   etcd: etcd only (what the lab's default etcd datastore needs; ~1-2 min
#   cold instead of ~8-40).
#   node: all, plus what `make cluster` runs: kubelet,
#   kube-controller-manager, kube-scheduler, kube-proxy and agnhost (the
#   upstream e2e test image's program, from k8s.io/kubernetes/test/images,
#   with its porter's TLS certificate and key in agnhost-porter/)
#   (~10 min more cold; the suite's other tests never ask for it).
#   e2e: node, plus the upstream conformance test binaries: e2e.test
#   (`go test -c k8s.io/kubernetes/test/e2e`) and the ginkgo CLI at the
#   version k8s.io/kubernetes requires, built in their own module folder
#   ($CACHE/e2e) so the node build's go.mod is left alone (large: ~20 min
#   cold on 2 cores; stamp .e2e-<kube>), and CoreDNS, the cluster DNS of
#   the sig-network specs (hack/build-coredns.sh: ~2 min cold).
#
# Output: $TABBY_KUBE_BIN (default ~/.cache/tabby-kube/bin) with
# kube-apiserver, kubectl, etcd; the stamp .built-<kube>-<etcd> once all
# three are there (.etcd-<etcd> once etcd is, .node-<kube> once the node
# binaries are). Cold: ~8 min on 2 cores; warm: seconds. Prints the bin
# folder on its last line.
set -euo pipefail
what=${1:-all}
if [[ $what == e2e ]]; then
	"$0" node >/dev/null
	"$(dirname "$0")/build-coredns.sh" >/dev/null
	exec "$(dirname "$0")/build-kube-e2e.sh"
fi
case $what in
all | etcd | node | e2e) ;;
*)
	echo "usage: $0 [all|etcd|node|e2e]" >&2
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
node_stamp="$BIN/.node-$KVER"
node_bins=(kubelet kube-controller-manager kube-scheduler kube-proxy agnhost)
# agnhost's porter serves TLS with the certificate upstream's image holds
# at / (test/images/agnhost/porter/localhost.{crt,key}); the cluster's
# agnhost image takes them from here.
porter_files=(localhost.crt localhost.key)
node_built() {
	[[ -f $node_stamp ]] || return 1
	for b in "${node_bins[@]}"; do [[ -x $BIN/$b ]] || return 1; done
	for f in "${porter_files[@]}"; do [[ -f $BIN/agnhost-porter/$f ]] || return 1; done
}
if [[ -f $stamp && -x $BIN/kube-apiserver && -x $BIN/kubectl && -x $BIN/etcd ]] &&
	{ [[ $what != node ]] || node_built; }; then
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
# The node binaries' packages are only required (and their modules only
# downloaded) when they are asked for.
pkgs=(cmd/kube-apiserver cmd/kubectl)
if [[ $what == node ]]; then
	pkgs+=(cmd/kubelet cmd/kube-scheduler cmd/kube-proxy test/images/agnhost cmd/kube-controller-manager)
fi
{
	printf '//go:build tools\n\npackage tools\n\nimport (\n'
	for p in "${pkgs[@]}"; do printf '\t_ "k8s.io/kubernetes/%s"\n' "$p"; done
	printf ')\n'
} >tools.go
go mod tidy
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=v$KVER -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(cut -d. -f2 <<<"$KVER") -X $vpkg.gitTreeState=clean"
if [[ ! -f $stamp ]]; then
	go build -ldflags "$ldflags" -o "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
	go build -ldflags "$ldflags" -o "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl
	touch "$stamp"
fi
if [[ $what == node ]]; then
	for p in "${pkgs[@]:2}"; do
		# CGO_ENABLED=0: static, so they also run inside the node images.
		CGO_ENABLED=0 go build -ldflags "$ldflags" -o "$BIN/$(basename "$p")" "k8s.io/kubernetes/$p"
	done
	mkdir -p "$BIN/agnhost-porter"
	for f in "${porter_files[@]}"; do
		install -m 0644 "$(go env GOMODCACHE)/k8s.io/kubernetes@v$KVER/test/images/agnhost/porter/$f" "$BIN/agnhost-porter/$f"
	done
	touch "$node_stamp"
fi
echo "$BIN"
