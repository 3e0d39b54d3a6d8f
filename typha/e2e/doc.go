// Package e2e holds Typha's end-to-end tests and benchmark (build tag
// integration): a real kube-apiserver, real Typha processes (the typha
// command), and felix's and confd's own Typha client code in the test
// process, the felix daemons on the real dataplane driver over a fake
// kernel that counts what is written.
package e2e
