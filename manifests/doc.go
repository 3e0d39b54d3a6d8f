// Package manifests holds what `kubectl apply -f manifests/` installs: the
// crd.projectcalico.org/v1 CRDs (crds/, generated from api/v3 by
// `make generate`), and later RBAC, the calico-node DaemonSet and the CNI
// install config. The Go files here only test that the manifests stay in
// sync with the API types.
package manifests
