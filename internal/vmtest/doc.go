// Package vmtest runs Tabby on Debian's own kernel: qemu VMs (software
// emulation: this machine's /dev/kvm runs only PVM guests) booted from a
// root filesystem and kernel built from Debian's packages alone
// (hack/build-vm-image.sh, cached under ~/.cache/tabby-vm), joined on a
// private L2 segment that lives in a network namespace of the harness's
// own. Each VM is one node with its own kernel: it runs the real
// calico-node and wires pods with the real calico CNI plugin, driven by
// the guest agent (package guest, cmd/tabby-vmguest) over the segment.
//
// Pieces, bottom up:
//   - EnsureImage: the cached image (built on first use).
//   - Segment: the namespace "<prefix>-seg" holding one bridge per
//     underlay subnet (172.30.<s+1>.0/24, the namespace itself routing
//     between them at .1), a tap per VM, and a TCP forwarder from
//     <router>:2379 to the datastore's unix socket: the VMs reach etcd over
//     the segment only, never over the host's network.
//   - Boot: one qemu per VM inside the segment's namespace, the image
//     shared read-only (snapshot=on), a 9p share carrying the binaries,
//     the guest's config and its outputs.
//   - Cluster (tests): etcd, segment, N VMs, guest agents ready, all
//     removed in t.Cleanup (qemu processes, the namespace, temp folders),
//     also on failure or timeout.
//
// Nothing here touches the root namespace's network: the bridge, taps
// and addresses are created inside the segment's namespace.
package vmtest
