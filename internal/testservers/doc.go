// Package testservers starts the real services integration tests run
// against: an etcd server and a Kubernetes API server (with its own etcd),
// each on free loopback ports with its state in the test's temp folder,
// stopped in t.Cleanup. Tests can stop and restart a server to prove
// recovery.
//
// Binaries come from hack/build-kube-binaries.sh (cached under
// ~/.cache/tabby-kube/bin, or $TABBY_KUBE_BIN). A missing binary fails the
// test with the command to run: real-service tests never skip.
package testservers
