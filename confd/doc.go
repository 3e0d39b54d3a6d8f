// Package confd will render BIRD 2 configuration from BGPConfiguration,
// BGPPeer, Node, IPPool and block affinities (a pure renderer) and drive a
// real BIRD (atomic write, validate, reload). Not yet implemented: see the
// [confd] issue.
package confd
