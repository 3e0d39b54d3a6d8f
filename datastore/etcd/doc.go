// Package etcd is the etcd v3 backend of datastore.Client.
//
// Layout follows Calico: a resource lives at
// /calico/resources/v3/projectcalico.org/<plural>/[<namespace>/]<name> as
// the JSON of its projectcalico.org/v3 object; IPAM bookkeeping lives under
// /calico/ipam/v2/ (blocks under assignment/block/, affinities under
// affinity/, handles under handle/, the IPAM configuration under config/).
// The resource version is etcd's mod-revision of the key, so every
// compare-and-swap is an etcd transaction guarded on that mod-revision.
//
// The client speaks etcd's API itself (gateway.go, grpcwire.go,
// gateway_watch.go): unary calls as gRPC over HTTP/2 with the handful of
// etcdserverpb messages encoded by hand, watches through etcd's JSON
// gateway. etcd's own client (grpc-go + protobuf) would cost the CNI
// plugin, started once per pod, ~4 ms of initialisation per call.
package etcd
