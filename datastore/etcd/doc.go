// Package etcd is the etcd v3 backend of datastore.Client.
//
// Layout follows Calico: a resource lives at
// /calico/resources/v3/projectcalico.org/<plural>/[<namespace>/]<name> as
// the JSON of its projectcalico.org/v3 object. IPAM bookkeeping is stored
// exactly as libcalico-go's backend model writes it, so a Calico cluster's
// allocations and Tabby's are one set (ipamkeys.go, ipamvalues.go): blocks
// at /calico/ipam/v2/assignment/ipv<4|6>/block/<addr>-<len>, affinities at
// /calico/ipam/v2/<host|virtual>/<node>/ipv<4|6>/block/<addr>-<len>,
// handles at /calico/ipam/v2/handle/<id>, the IPAM configuration at
// /calico/ipam/v2/config, each value the bare model struct's JSON.
// The resource version is etcd's mod-revision of the key, so every
// compare-and-swap is an etcd transaction guarded on that mod-revision.
//
// How the client reaches etcd is a Transport (transport.go), in the few
// etcdserverpb messages of package kvpb; keys, encoding, CAS, errors and
// watch decoding above it are shared. Two transports:
//   - etcdlib (etcd's client library): every long-running component
//     (felix, confd, calicoctl) passes it in dsconfig.Backends.
//   - the hand-written one here (gateway.go, grpcwire.go, auth.go): unary
//     calls as gRPC over HTTP/2 with hand-encoded messages, watches through
//     etcd's JSON gateway. The calico CNI plugin, started once per pod,
//     uses it to keep grpc-go's start-up cost out of every ADD.
//
// Both speak TLS (tls.go: CA, client certificate and key from files or
// inline, the certificate re-read when its files change) and etcd's
// username/password authentication; the endpoints may come from SRV
// records (srv.go). Refusals (wrong CA, rejected or expired certificate,
// wrong password, no permission) are datastore.AccessError naming the
// cause (access.go), never mistaken for the store being down.
package etcd
