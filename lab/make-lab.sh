#!/usr/bin/env bash
# The story `make lab` tells, once the binaries are built: a fresh lab (the
# upstream NetworkPolicy e2e model on 3 nodes), its connectivity matrix,
# the sample policy applied, the matrix again; the lab stays up.
set -euo pipefail
cd "$(dirname "$0")/.."
LAB="bin/tabby-lab"
"$LAB" down >/dev/null
start=$(date +%s%N)
"$LAB" up "$@"
"$LAB" status
echo
echo "==> every pod to every other pod, on TCP and UDP 80 and 81 ('.' allowed, 'X' denied):"
"$LAB" probe -o table
full=$(date +%s%N)
echo
ms=$(((full - start) / 1000000))
printf '==> up to the full matrix: %d.%03d s\n' $((ms / 1000)) $((ms % 1000))
echo
echo "==> applying lab/examples/deny-x-allow-from-y.yaml (a default-deny in x, plus an allow from y):"
sed -n '/^apiVersion/,$p' lab/examples/deny-x-allow-from-y.yaml | sed 's/^/    /'
"$LAB" apply -f lab/examples/deny-x-allow-from-y.yaml
"$LAB" probe -o table
cat <<'NEXT'

The lab is still running. Next:
  eval "$(bin/tabby-lab env)"      # point calicoctl (and kubectl) at it
  calicoctl get networkpolicy -A -o yaml
  bin/tabby-lab probe               # one line per probe: x/a -> y/b tcp/80 allow
  bin/tabby-lab exec x/a -- ip addr
  bin/tabby-lab delete -f lab/examples/deny-x-allow-from-y.yaml
  bin/tabby-lab up --datastore kubernetes   # after down: the same on the real kube-apiserver
  bin/tabby-lab down                # remove everything
NEXT
