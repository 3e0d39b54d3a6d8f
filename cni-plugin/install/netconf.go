package install

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// DefaultNetworkConfig is the template used when CNI_NETWORK_CONFIG (and
// CNI_NETWORK_CONFIG_FILE) is unset: Calico's, Kubernetes datastore,
// calico-ipam, portmap chained.
const DefaultNetworkConfig = `{
  "name": "k8s-pod-network",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "calico",
      "log_level": "__LOG_LEVEL__",
      "log_file_path": "__LOG_FILE_PATH__",
      "datastore_type": "__DATASTORE_TYPE__",
      "nodename": "__KUBERNETES_NODE_NAME__",
      "mtu": __CNI_MTU__,
      "ipam": {"type": "calico-ipam"},
      "policy": {"type": "k8s"},
      "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}
    },
    {
      "type": "portmap",
      "snat": true,
      "capabilities": {"portMappings": true}
    }
  ]
}`

// Placeholders are the names Calico's install-cni replaces in the template
// (each written __NAME__ in it), with the environment variable each is
// taken from and its default when that is unset. KUBECONFIG_FILEPATH and
// the ETCD_*_FILE names are computed, not read. Calico's legacy
// __SERVICEACCOUNT_TOKEN__ is refused (see Install).
var Placeholders = []struct{ Name, Env, Default string }{
	{"LOG_LEVEL", "LOG_LEVEL", "info"},
	{"LOG_FILE_PATH", "LOG_FILE_PATH", "/var/log/calico/cni/cni.log"},
	{"LOG_FILE_MAX_SIZE", "LOG_FILE_MAX_SIZE", "100"},
	{"LOG_FILE_MAX_AGE", "LOG_FILE_MAX_AGE", "30"},
	{"LOG_FILE_MAX_COUNT", "LOG_FILE_MAX_COUNT", "10"},
	{"DATASTORE_TYPE", "DATASTORE_TYPE", "kubernetes"},
	{"KUBERNETES_NODE_NAME", "KUBERNETES_NODE_NAME", ""}, // default: the host name
	{"CNI_MTU", "CNI_MTU", "1500"},
	{"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_HOST", ""},
	{"KUBERNETES_SERVICE_PORT", "KUBERNETES_SERVICE_PORT", ""},
	{"ETCD_ENDPOINTS", "ETCD_ENDPOINTS", ""},
	{"ETCD_DISCOVERY_SRV", "ETCD_DISCOVERY_SRV", ""},
	{"KUBECONFIG_FILEPATH", "", ""},
	{"ETCD_CA_CERT_FILE", "", ""},
	{"ETCD_CERT_FILE", "", ""},
	{"ETCD_KEY_FILE", "", ""},
}

var leftover = regexp.MustCompile(`__[A-Z][A-Z0-9_]*__`)

// RenderNetworkConfig replaces every __NAME__ of values in the template
// and checks the result is a JSON object naming plugins. A placeholder
// left unreplaced is refused (the plugin would be called with it).
func RenderNetworkConfig(template string, values map[string]string) ([]byte, error) {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	pairs := make([]string, 0, 2*len(names))
	for _, n := range names {
		pairs = append(pairs, "__"+n+"__", values[n])
	}
	out := strings.NewReplacer(pairs...).Replace(template)
	if m := leftover.FindAllString(out, -1); len(m) > 0 {
		return nil, fmt.Errorf("the CNI network config template has placeholders install-cni does not know: %s", strings.Join(m, ", "))
	}
	var conf struct {
		Name    string            `json:"name"`
		Type    string            `json:"type"`
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(out), &conf); err != nil {
		return nil, fmt.Errorf("the rendered CNI network config is not a JSON object: %w\n%s", err, out)
	}
	if conf.Name == "" || (conf.Type == "" && len(conf.Plugins) == 0) {
		return nil, fmt.Errorf("the rendered CNI network config names no network or plugin:\n%s", out)
	}
	return []byte(out), nil
}
