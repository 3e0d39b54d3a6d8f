// Package e2e holds calico-node's end-to-end tests (privileged and
// integration tags): the real calico-node binary runs in node namespaces
// of an internal/multinode lab against a real etcd, with felix, confd and
// BIRD under it, and pods wired by the real CNI binary.
package e2e
