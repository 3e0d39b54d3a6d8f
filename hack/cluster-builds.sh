#!/usr/bin/env bash
# What a fresh cluster is built from: Debian's packages, the Kubernetes
# binaries (hack/build-kube-binaries.sh TARGET, default node; cached),
# Tabby's binaries and image, the standard loopback CNI plugin. Prints
# how long it took.
#
# Usage: hack/cluster-builds.sh [node|e2e]  (root; from the repository's root)
set -euo pipefail
t0=$(date +%s)
hack/install-packages.sh
hack/build-kube-binaries.sh "${1:-node}" >/dev/null
make --no-print-directory build image >/dev/null
go build -o bin/ github.com/containernetworking/plugins/plugins/main/loopback
echo "builds: $(($(date +%s) - t0))s"
