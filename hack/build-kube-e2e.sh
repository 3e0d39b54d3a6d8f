#!/usr/bin/env bash
# Builds the upstream Kubernetes end-to-end test binaries from the Go module
# proxy only, at the Kubernetes version the rest of the lab runs (KVER, as
# hack/build-kube-binaries.sh): e2e.test (`go test -c` of
# k8s.io/kubernetes/test/e2e, every suite in it, as the release's
# kubernetes-test tarball ships it) and ginkgo (github.com/onsi/ginkgo/v2 at
# the version k8s.io/kubernetes requires). Called by
# `hack/build-kube-binaries.sh e2e`, which builds the node binaries first.
#
# Output: e2e.test and ginkgo in $TABBY_KUBE_BIN (default
# ~/.cache/tabby-kube/bin), stamp .e2e-<kube>. Prints the bin folder last.
set -euo pipefail
KVER=${KVER:-1.37.2}
STAGING_VER=0.${KVER#1.}
CACHE=${TABBY_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tabby-kube}
BIN=${TABBY_KUBE_BIN:-$CACHE/bin}
stamp="$BIN/.e2e-$KVER"
if [[ -f $stamp && -x $BIN/e2e.test && -x $BIN/ginkgo ]]; then
	echo "$BIN"
	exit 0
fi
mkdir -p "$BIN" "$CACHE/e2e"
cd "$CACHE/e2e"
go mod download "k8s.io/kubernetes@v$KVER"
upstream="$(go env GOMODCACHE)/k8s.io/kubernetes@v$KVER"
ginkgo_ver=$(awk '$1 == "github.com/onsi/ginkgo/v2" {print $2; exit}' "$upstream/go.mod")
{
	printf 'module tabby.local/kubee2e\n\ngo 1.26.0\n\nrequire (\n\tk8s.io/kubernetes v%s\n\tgithub.com/onsi/ginkgo/v2 %s\n)\n\nreplace (\n' "$KVER" "$ginkgo_ver"
	# As the node build: each staging module at its published version.
	sed -n '/^replace (/,/^)/p' "$upstream/go.mod" |
		awk '/=> \.\/staging/ {print $1}' |
		grep -v -e '^k8s.io/sample-controller$' -e '^k8s.io/sample-cli-plugin$' |
		while read -r m; do printf '\t%s => %s v%s\n' "$m" "$m" "$STAGING_VER"; done
	printf ')\n'
} >go.mod
# go mod tidy keeps what the main module's packages import: name every
# package e2e_test.go (the test binary's main) imports, and the ginkgo CLI.
{
	printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "github.com/onsi/ginkgo/v2/ginkgo"\n\t_ "k8s.io/kubernetes/test/e2e"\n'
	sed -n '/^import (/,/^)/p' "$upstream/test/e2e/e2e_test.go" |
		grep -o '"k8s.io/kubernetes/[^"]*"' | sort -u |
		while read -r p; do printf '\t_ %s\n' "$p"; done
	printf ')\n'
} >tools.go
go mod tidy
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=v$KVER -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(cut -d. -f2 <<<"$KVER") -X $vpkg.gitTreeState=clean"
go build -o "$BIN/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
# -vet=off: go test -c would otherwise vet every one of e2e.test's ~1700
# packages (a long second pass over the whole build).
CGO_ENABLED=0 go test -c -vet=off -ldflags "$ldflags" -o "$BIN/e2e.test" k8s.io/kubernetes/test/e2e
touch "$stamp"
echo "$BIN"
