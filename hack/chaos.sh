#!/usr/bin/env bash
# `make chaos` (issue 32): on a fresh cluster, the faults in turn under
# churn (tabby-lab cluster chaos), then the cluster brought down whatever
# happened. Its output ends with one line per invariant; exits non-zero
# on any violation.
#
# Usage: hack/chaos.sh  (root; from the repository's root)
# Environment:
#   TABBY_CHAOS_PODS     the churn's pod creations in all (default 1000)
#   CHAOS_ARGS           extra `tabby-lab cluster chaos` flags (--outage,
#                        --power-off, --faults, --seed)
#   CLUSTER_ARGS         extra `tabby-lab cluster up` flags
#   TABBY_CLUSTER_STATE  the cluster's state folder (default
#                        /run/tabby-cluster-chaos)
set -euo pipefail
export TABBY_CLUSTER_STATE=${TABBY_CLUSTER_STATE:-/run/tabby-cluster-chaos}
hack/cluster-builds.sh node
trap 'bin/tabby-lab cluster down >/dev/null' EXIT
bin/tabby-lab cluster down >/dev/null
# shellcheck disable=SC2086 # word splitting of the args is wanted
bin/tabby-lab cluster up ${CLUSTER_ARGS:-}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
bin/tabby-lab cluster chaos --pods "${TABBY_CHAOS_PODS:-1000}" ${CHAOS_ARGS:-}
