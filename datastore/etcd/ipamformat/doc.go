// Package ipamformat is Calico's storage format of the IPAM records, defined
// once: the etcd keys (libcalico-go's backend layout, keys.go) and the
// model JSON of their values (values.go), with their mapping to and from
// the v3 IPAM kinds. The etcd backend stores IPAMBlock, BlockAffinity,
// IPAMHandle and IPAMConfiguration in it, and calicoctl's datastore
// migrate writes and reads Calico's export of them (its key/value pairs)
// with it. Pure: no I/O.
package ipamformat
