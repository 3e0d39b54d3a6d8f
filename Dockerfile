# The Tabby image for people with Docker. `make image` builds the same
# image without Docker (hack/imagebuild: the same Debian packages, pinned
# in hack/imagebuild/debian.lock, and the same binaries); image.conf
# there is the source of truth, and TestDockerfileMatchesConf keeps this
# file equal to it (suite, package list, files copied, command).
#
# The binaries come from the project, built static beforehand:
#
#   CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o bin/ \
#     ./cni-plugin/cmd/... ./node/cmd/calico-node ./kubecontrollers/cmd/... \
#     ./calicoctl ./goldmane/cmd/goldmane ./typha/cmd/typha github.com/containernetworking/plugins/plugins/meta/portmap
#   docker build -t docker.io/tabbynet/tabby:$(cat VERSION) .
#
# portmap (chained after calico in 10-calico.conflist) is built from the
# containernetworking/plugins module already in go.mod.
FROM debian:bookworm-slim

# What calico-node drives on the node, from Debian:
# - iptables (nft and legacy backends, iptables-restore/-save): felix's rules
# - ipset: felix's IP sets
# - conntrack: flushing the entries of removed endpoints' addresses
# - bird2: BGP (confd renders its configuration, calico-node supervises it)
# - iproute2, kmod: diagnostics and loading ipip/vxlan/ip_set modules
# - ca-certificates: TLS to etcd and the API server
# - libatm1: tc's ATM qdisc plugin (iproute2 only recommends it)
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      iptables ipset conntrack bird2 iproute2 kmod ca-certificates libatm1 \
 && rm -rf /var/lib/apt/lists/*

# The CNI binaries install-cni copies into the host's /opt/cni/bin.
COPY bin/calico bin/calico-ipam bin/calico-k8s bin/portmap /opt/cni/bin/

# The node agent, the installer, the controllers and their tools.
COPY bin/calico-node bin/install-cni bin/kube-controllers bin/check-status bin/calicoctl /usr/bin/

# The flow aggregator and its page (Calico's Goldmane and Whisker).
COPY bin/goldmane /usr/bin/

# Typha: the datastore's fan-out to the nodes (the calico-typha Deployment).
COPY bin/typha /usr/bin/

# BIRD's control socket and Calico's state live on host paths the
# DaemonSet mounts (/var/run/calico, /var/lib/calico).
CMD ["/usr/bin/calico-node"]
