// Package typha is Tabby's Typha: a fan-out server between the datastore
// and the nodes, as Calico's. One Typha holds one set of watches on the
// datastore per syncer type (felix's kinds, confd's "bgp" kinds), keeps
// the current snapshot (snapcache) and serves each client over TCP (or
// mutual TLS) the snapshot and then the deltas (syncserver). Felix and
// confd reach it through syncclient, which is a datastore.Syncer: on a
// lost connection it reconnects (to another replica when there are
// several, found by discovery) and diffs the new snapshot against what
// it delivered, so its consumer sees only real changes.
//
//	datastore -> kdd/WatchSyncer -> snapcache -> syncserver == TCP ==> syncclient -> felix / confd
//
// The protocol (syncproto) keeps Calico's message names and handshake;
// the key/value payload is Tabby's (see syncproto's doc).
package typha
