// Package install puts the calico CNI plugin on a node, as Calico's
// install-cni does from its init container: the plugin binaries into
// /opt/cni/bin, the network configuration (rendered from Calico's
// CNI_NETWORK_CONFIG template and placeholders) into /etc/cni/net.d, and a
// kubeconfig for the plugin holding a ServiceAccount token for
// calico-cni-plugin from the TokenRequest API. Every file is replaced
// atomically (written beside its target, then renamed), so a container
// runtime calling the plugin meanwhile sees the old file or the new one,
// never a part. With the Kubernetes datastore, calico-k8s is installed as
// calico (the lean calico binary would only exec it). TokenRefresher keeps the token fresh: install-cni runs it
// when it stays up (SLEEP=true), calico-node runs it in-process.
package install
