// Package manifests holds what `kubectl apply -f` installs: tabby.yaml
// (Kubernetes datastore: the crd.projectcalico.org/v1 CRDs, RBAC, the
// calico-config ConfigMap, the calico-node DaemonSet with install-cni, the
// kube-controllers Deployment, as Calico's calico.yaml) and tabby-etcd.yaml
// (etcd datastore, as Calico's calico-etcd.yaml). The CRDs (crds/) are
// generated from api/v3 and both manifests from parts/ by `make generate`
// (hack/manifestgen). CRDs embeds crds/ for tabby-lab; the other Go files
// here only test them: in sync with their
// sources, accepted by a real kube-apiserver, and the RBAC enough for what
// each component calls and no more.
package manifests
