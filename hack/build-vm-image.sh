#!/usr/bin/env bash
# Builds the root filesystem and kernel the VM tests boot (internal/vmtest):
# Debian bookworm's own packages only (debootstrap --variant=minbase with
# the stock linux-image-amd64), written into an ext4 image with
# `mkfs.ext4 -d`. Cached under $TABBY_VM_CACHE (default ~/.cache/tabby-vm),
# in a folder keyed by the package list, the suite and this script's init,
# so a change of any of them builds a new image.
#
# Usage: hack/build-vm-image.sh      (as root; needs debootstrap, e2fsprogs)
# Output: the cache folder holding root.img, vmlinuz and initrd.img, on the
# last line. Cold: ~4 min; cached: instant.
set -euo pipefail
SUITE=bookworm
MIRROR=${TABBY_VM_MIRROR:-http://deb.debian.org/debian}
# What the guests run: the kernel (ipip, wireguard, dummy, vxlan as
# modules), iproute2, the iptables/ipset/conntrack tools felix drives, BIRD
# for the lab's BGP, tcpdump/ping for the tests' captures and probes, and
# containerd + runc for lab/cluster's VM nodes (kubelet's runtime).
PACKAGES=linux-image-amd64,initramfs-tools,kmod,iproute2,iptables,ipset,conntrack,ca-certificates,bird2,tcpdump,iputils-ping,procps,containerd,runc
# The root's size: a VM node imports ~0.5 GB of images (2 GB left 337 MB).
SIZE=4G
CACHE=${TABBY_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tabby-vm}

# The guest's init: mounts, then the share's run script, then power off.
# Per-VM settings come from the kernel command line (tabby.*).
read -r -d '' INIT <<'INITEOF' || true
#!/bin/sh
# tabby vm init: the share's run.sh is the whole life of this VM.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mkdir -p /run/netns /var/run
ip link set lo up
modprobe 9pnet_virtio
mkdir -p /mnt/share
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 share /mnt/share; then
	id=$(sed -n 's/.*tabby\.id=\([^ ]*\).*/\1/p' /proc/cmdline)
	echo "tabby-vm: $id running run.sh" >/dev/console
	sh /mnt/share/run.sh "$id" >"/mnt/share/out-$id.log" 2>&1
	echo $? >"/mnt/share/exit-$id"
	sync
else
	echo "tabby-vm: cannot mount the share" >/dev/console
fi
echo o >/proc/sysrq-trigger
sleep 60
INITEOF

key=$(printf '%s\n%s\n%s\n%s\n' "$SUITE" "$PACKAGES" "$SIZE" "$INIT" | sha256sum | cut -c1-16)
OUT=$CACHE/$SUITE-$key
if [[ -f $OUT/.done ]]; then
	echo "$OUT"
	exit 0
fi
[[ $(id -u) == 0 ]] || { echo "build-vm-image: must run as root (debootstrap)" >&2; exit 1; }
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp/root" "$MIRROR" >"$tmp/debootstrap.log" 2>&1 || {
	tail -30 "$tmp/debootstrap.log" >&2
	exit 1
}
printf '%s\n' "$INIT" >"$tmp/root/sbin/tabbyinit"
chmod 755 "$tmp/root/sbin/tabbyinit"
echo tabby-vm >"$tmp/root/etc/hostname"
rm -rf "$tmp/root/var/cache/apt/archives/"*.deb
mkdir -p "$tmp/out"
cp "$tmp"/root/boot/vmlinuz-* "$tmp/out/vmlinuz"
cp "$tmp"/root/boot/initrd.img-* "$tmp/out/initrd.img"
mkfs.ext4 -q -F -L tabbyroot -d "$tmp/root" "$tmp/out/root.img" "$SIZE"
echo "$PACKAGES" >"$tmp/out/packages"
echo "built in $((SECONDS - start)) s" >"$tmp/out/build-time"
touch "$tmp/out/.done"
rm -rf "$OUT"
mv "$tmp/out" "$OUT"
echo "build-vm-image: $OUT built in $((SECONDS - start)) s" >&2
echo "$OUT"
