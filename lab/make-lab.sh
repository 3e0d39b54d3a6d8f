#!/usr/bin/env bash
# `make lab`: installs what the lab needs, builds the binaries it runs,
# then tells the story: a fresh lab (the upstream NetworkPolicy e2e model
# on 3 nodes), its connectivity matrix, the sample policy applied, the
# matrix again; the lab stays up. Each part is timed.
#
# DATASTORE=etcd (default) needs etcd only; DATASTORE=kubernetes also
# builds the real kube-apiserver and kubectl (hack/build-kube-binaries.sh,
# ~8 min or more cold). LAB_SETUP=0 skips the install and build parts.
# Other arguments go to `tabby-lab up`.
set -euo pipefail
cd "$(dirname "$0")/.."
DATASTORE=${DATASTORE:-etcd}
LAB="bin/tabby-lab"
# The binaries the lab runs (not all of `make build`'s).
LAB_CMDS=(./node/cmd/calico-node ./cni-plugin/cmd/calico ./cni-plugin/cmd/calico-ipam
	./cni-plugin/cmd/calico-k8s ./calicoctl ./lab/cmd/tabby-lab ./goldmane/cmd/goldmane)

case $DATASTORE in
etcd) servers=etcd ;;
kubernetes) servers=all ;;
*)
	echo "DATASTORE=$DATASTORE: use etcd or kubernetes" >&2
	exit 2
	;;
esac
if ((EUID != 0)); then
	echo "make lab needs root: it installs packages and creates network namespaces" >&2
	exit 1
fi
if ! command -v go >/dev/null; then
	echo "no go on PATH: install Go $(sed -n 's/^go //p' go.mod) or later first (https://go.dev/doc/install)" >&2
	exit 1
fi

parts=()
now() { date +%s%N; }
secs() { printf '%d.%d s' $(($1 / 1000000000)) $(($1 % 1000000000 / 100000000)); }
# part NAME CMD...: runs CMD and remembers how long it took.
part() {
	local name=$1 t0
	shift
	echo "==> $name"
	t0=$(now)
	"$@"
	parts+=("$name $(secs $(($(now) - t0)))")
}

# Loading the packages fetches exactly the modules they need.
modules() { go list -deps "${LAB_CMDS[@]}" >/dev/null; }

t_all=$(now)
if [[ ${LAB_SETUP:-1} != 0 ]]; then
	part "packages (hack/install-packages.sh)" hack/install-packages.sh
	part "Go modules" modules
	part "$([[ $servers == etcd ]] && echo etcd || echo 'etcd, kube-apiserver, kubectl') (hack/build-kube-binaries.sh $servers)" \
		hack/build-kube-binaries.sh "$servers"
	mkdir -p bin
	part "build (${LAB_CMDS[*]##*/})" go build -o bin/ "${LAB_CMDS[@]}"
fi

"$LAB" down >/dev/null
start=$(now)
"$LAB" up --datastore "$DATASTORE" "$@"
"$LAB" status
echo
echo "==> every pod to every other pod, on TCP and UDP 80 and 81 ('.' allowed, 'X' denied):"
"$LAB" probe -o table
parts+=("up to the full matrix $(secs $(($(now) - start)))")
echo
echo "==> applying lab/examples/deny-x-allow-from-y.yaml (a default-deny in x, plus an allow from y):"
sed -n '/^apiVersion/,$p' lab/examples/deny-x-allow-from-y.yaml | sed 's/^/    /'
t0=$(now)
"$LAB" apply -f lab/examples/deny-x-allow-from-y.yaml
"$LAB" probe -o table
parts+=("apply and probe $(secs $(($(now) - t0)))")
echo
echo "==> make lab took $(secs $(($(now) - t_all))):"
printf '    %s\n' "${parts[@]}"
cat <<'NEXT'

The lab is still running. Next:
  eval "$(bin/tabby-lab env)"      # point calicoctl (and kubectl) at it
  calicoctl get networkpolicy -A -o yaml
  calicoctl node status             # node0's BGP sessions (TABBY_LAB_NODE=node1 for another)
  bin/tabby-lab report node0        # what node0's felix programmed, per endpoint
  bin/tabby-lab probe               # one line per probe: x/a -> y/b tcp/80 allow
  bin/tabby-lab exec x/a -- ip addr
  bin/tabby-lab restart node1       # after its calico-node crashed (bin/tabby-lab status says)
  bin/tabby-lab delete -f lab/examples/deny-x-allow-from-y.yaml
  bin/tabby-lab down                # remove everything
  make lab DATASTORE=kubernetes     # the same on the real kube-apiserver (builds it first: ~8 min or more cold)
NEXT
