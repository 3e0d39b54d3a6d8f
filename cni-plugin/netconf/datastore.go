package netconf

import (
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// DatastoreSpec is the datastore the network config names, as Calico's
// plugin reads it: the netconf's settings, with etcd's username and
// password from the runtime's environment (ETCD_USERNAME, ETCD_PASSWORD;
// the netconf has no field for them).
func (c *NetConf) DatastoreSpec(getenv func(string) string) dsconfig.Spec {
	return dsconfig.Spec{
		DatastoreType: c.DatastoreType, EtcdEndpoints: c.EtcdEndpoints, EtcdDiscoverySrv: c.EtcdDiscovery,
		EtcdKeyFile: c.EtcdKeyFile, EtcdCertFile: c.EtcdCertFile, EtcdCACertFile: c.EtcdCaCertFile,
		EtcdUsername: getenv("ETCD_USERNAME"), EtcdPassword: getenv("ETCD_PASSWORD"),
		Kubeconfig: c.Kubernetes.Kubeconfig, K8sAPIEndpoint: c.Kubernetes.K8sAPIRoot,
	}
}

// DatastoreConfigError is a datastore setting that cannot work (a
// certificate file missing, a key without its certificate, ...): CNI code
// 7 naming the cause.
func DatastoreConfigError(err error) *Error {
	return invalid("", "datastore settings: %v", err)
}
