// Package render is confd's pure core: it turns the BGP resources of the
// projectcalico.org/v3 API (BGPConfiguration, BGPPeer, BGPFilter, Node,
// IPPool, BlockAffinity, IPAMBlock) plus the local node's name into one BIRD 2
// configuration text (IPv4 and IPv6 in one daemon).
//
// The semantics are Calico's (confd's bird.cfg templates and its peer
// computation): node-to-node mesh with the lower address passive, global and
// node-specific BGPPeers with nodeSelector/peerSelector expansion and
// automatic reverse peerings, route reflectors, per-node AS numbers, export
// of this node's affine blocks and the pools with BGP export enabled. The
// syntax is stock BIRD 2 (see ../../../shared/reference/bird2/NOTES.md for
// the measured pitfalls it encodes).
//
// Per-node data that changes often (blocks, pools, communities, BGPFilter
// rules) lives in functions and static routes, never in protocol options:
// BIRD then reloads only the affected channels on `configure` instead of
// restarting sessions.
//
// Output is deterministic: everything is sorted, there are no timestamps.
// Secrets arrive already resolved in Input.Secrets; this package never logs.
package render
