#!/usr/bin/env bash
# Runs upstream Kubernetes e2e tests against a fresh `make cluster`, once
# per datastore: builds e2e.test and ginkgo (hack/build-kube-binaries.sh
# e2e, cached), Tabby's binaries and image, then for each datastore brings
# a cluster up, runs `tabby-lab cluster e2e` and always brings it down.
# Prints each run's "N passed, N failed, N skipped" and duration, then the
# total as its last line. Exits non-zero if any spec failed.
#
# Usage: hack/e2e-cluster.sh  (root; from the repository's root)
# Environment:
#   E2E_SUITE       netpol (default: the NetworkPolicy e2e), network (the
#                   [sig-network] [Conformance] specs, on clusters up with
#                   --dns: CoreDNS, which hack/build-kube-binaries.sh e2e
#                   builds) or netpol-sctp (the NetworkPolicy e2e's SCTP
#                   specs on clusters up with --vm-nodes 1 --nodes 2: the
#                   VM node runs Debian's kernel, which has SCTP; its pods'
#                   connectivity is checked first with `tabby-lab cluster
#                   vm-check`)
#   E2E_DATASTORES  datastores to run on (default "kubernetes etcdv3")
#   E2E_ARGS        extra `tabby-lab cluster e2e` flags (--focus, --skip,
#                   --procs)
#   CLUSTER_ARGS    extra `tabby-lab cluster up` flags
#   TABBY_CLUSTER_STATE  the cluster's state folder (default
#                   /run/tabby-cluster-e2e)
set -euo pipefail
export TABBY_CLUSTER_STATE=${TABBY_CLUSTER_STATE:-/run/tabby-cluster-e2e}
datastores=${E2E_DATASTORES:-kubernetes etcdv3}
suite=${E2E_SUITE:-netpol}
t0=$(date +%s)
hack/install-packages.sh
hack/build-kube-binaries.sh e2e >/dev/null
up_args=()
if [[ $suite == network ]]; then
	up_args+=(--dns) # CoreDNS: built with e2e.test
fi
if [[ $suite == netpol-sctp ]]; then
	hack/build-vm-image.sh >/dev/null # cached
	up_args+=(--vm-nodes 1 --nodes 2)
fi
make --no-print-directory build image >/dev/null
go build -o bin/ github.com/containernetworking/plugins/plugins/main/loopback
echo "builds: $(($(date +%s) - t0))s"
trap 'bin/tabby-lab cluster down >/dev/null' EXIT
passed=0 failed=0 skipped=0 rc=0
for ds in $datastores; do
	bin/tabby-lab cluster down >/dev/null
	t1=$(date +%s)
	# shellcheck disable=SC2086 # word splitting of the args is wanted
	bin/tabby-lab cluster up --datastore "$ds" "${up_args[@]}" ${CLUSTER_ARGS:-}
	out=$(mktemp)
	# E2E_ARGS is shell words (a focus may be quoted).
	eval "e2e_args=(${E2E_ARGS:-})"
	if [[ $suite == netpol-sctp ]] && ! bin/tabby-lab cluster vm-check; then
		echo "e2e on $ds: the VM node's pods are not on the pod network"
		rc=1
		continue
	fi
	bin/tabby-lab cluster e2e --suite "$suite" "${e2e_args[@]}" | tee "$out" || rc=1
	line=$(grep -a -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$out" | tail -1 || true)
	rm -f "$out"
	if [[ -z $line ]]; then
		echo "e2e on $ds: no result"
		rc=1
		continue
	fi
	read -r p _ f _ s _ <<<"${line//,/}"
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	echo "e2e on $ds: $line in $(($(date +%s) - t1))s (cluster up included)"
done
echo "duration: $(($(date +%s) - t0))s"
echo "$passed passed, $failed failed, $skipped skipped"
exit $rc
