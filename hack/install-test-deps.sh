#!/usr/bin/env bash
# Installs the system packages Tabby's tests use (Debian). Idempotent: skips
# apt when everything is present. Needs root.
set -euo pipefail
pkgs=(make git iproute2 iptables ipset conntrack bird2 ncat)
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
go mod download
