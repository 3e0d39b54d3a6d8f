// Package e2e holds the CNI plugin's end-to-end tests: the real `calico`
// binary driven through libcni exactly as containerd drives it (conflists
// on disk, binaries on a CNI path), inside a test node namespace, against a
// real etcd, wiring real pod namespaces. Only tests live here.
package e2e
