# The image manifests/tabby.yaml and manifests/tabby-etcd.yaml run
# (docker.io/tabbynet/tabby:latest, hack/manifestgen's Image): calico-node
# and install-cni in the calico-node DaemonSet, kube-controllers in its
# Deployment. Not built by the tests (base images cannot be pulled on the
# build machines); TestDockerfileHasWhatManifestsRun keeps it in step with
# the manifests.
#
# The binaries come from the project, built static beforehand:
#
#   CGO_ENABLED=0 make build
#   CGO_ENABLED=0 go build -o bin/ github.com/containernetworking/plugins/plugins/meta/portmap
#   docker build -t docker.io/tabbynet/tabby:latest .
#
# portmap (chained after calico in 10-calico.conflist) is built from the
# containernetworking/plugins module already in go.mod.
# calico-node (node/cmd/calico-node), kube-controllers and check-status
# (kubecontrollers/cmd) are built by make build.
FROM debian:trixie-slim

# What calico-node drives on the node, from Debian:
# - iptables (nft and legacy backends, iptables-restore/-save): felix's rules
# - ipset: felix's IP sets
# - conntrack: flushing the entries of removed endpoints' addresses
# - bird2: BGP (confd renders its configuration, calico-node supervises it)
# - iproute2, kmod: diagnostics and loading ipip/vxlan/ip_set modules
# - ca-certificates: TLS to etcd and the API server
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      iptables ipset conntrack bird2 iproute2 kmod ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# The CNI binaries install-cni copies into the host's /opt/cni/bin.
COPY bin/calico bin/calico-ipam bin/calico-k8s bin/portmap /opt/cni/bin/

# The node agent, the installer, the controllers and their tools.
COPY bin/calico-node bin/install-cni bin/kube-controllers bin/check-status bin/calicoctl /usr/bin/

# BIRD's control socket and Calico's state live on host paths the
# DaemonSet mounts (/var/run/calico, /var/lib/calico).
CMD ["/usr/bin/calico-node"]
