#!/usr/bin/env bash
# Installs the Debian packages Tabby's lab and tests use: the network tools
# (iproute2, iptables, ipset, nftables, conntrack), BIRD 2, ncat, curl and tcpdump
# (tests), what the cluster's agnhost image holds as upstream's does (busybox,
# curl, netcat-openbsd, and dig from bind9-dnsutils for the DNS e2e), git and make, Chromium (headless tests and the benchmark of the
# aggregator's flow page), protoc (make generate: the Goldmane API),
# and the CA certificates the Go module proxy's TLS needs (a minimal Debian
# has none). Idempotent: skips apt when everything is present. Needs root.
set -euo pipefail
pkgs=(ca-certificates make git iproute2 iptables ipset nftables conntrack bird2 ncat
	curl tcpdump busybox-static netcat-openbsd bind9-dnsutils containerd runc qemu-system-x86 debootstrap e2fsprogs chromium protobuf-compiler)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
