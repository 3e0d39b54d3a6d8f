package netconf

import "encoding/json"

// DatastoreOf applies Parse's datastore choice, in one pass, to a config
// that may still be invalid: whether it is for the Kubernetes datastore,
// and its etcd_endpoints (false, "" when it cannot be read: the full
// parser then reports why). For the calico binary, which hands
// Kubernetes-datastore calls to calico-k8s before parsing anything, and
// for install-cni, which then installs calico-k8s as calico.
func DatastoreOf(conf []byte) (kubernetes bool, etcdEndpoints string) {
	var c struct {
		DatastoreType string `json:"datastore_type"`
		EtcdEndpoints string `json:"etcd_endpoints"`
		Kubernetes    struct {
			Kubeconfig string `json:"kubeconfig"`
			K8sAPIRoot string `json:"k8s_api_root"`
		} `json:"kubernetes"`
	}
	if json.Unmarshal(conf, &c) != nil {
		return false, ""
	}
	if c.DatastoreType != "" {
		return c.DatastoreType == DatastoreKubernetes, c.EtcdEndpoints
	}
	return c.EtcdEndpoints == "" && (c.Kubernetes.Kubeconfig != "" || c.Kubernetes.K8sAPIRoot != ""), c.EtcdEndpoints
}
