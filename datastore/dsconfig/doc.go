// Package dsconfig says which datastore a component talks to, the way
// Calico's components are told: a CalicoAPIConfig file
// (/etc/calico/calicoctl.cfg) and/or environment variables (DATASTORE_TYPE,
// ETCD_ENDPOINTS, KUBECONFIG, K8S_API_ENDPOINT, ...), environment winning
// field by field. Backends.New builds the matching datastore.Client from
// the backends the calling binary links in.
package dsconfig
