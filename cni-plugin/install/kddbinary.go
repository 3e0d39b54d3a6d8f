package install

import (
	"encoding/json"
	"path/filepath"
	"slices"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
)

// handsToCalicoK8s says whether the calico plugin of a rendered network
// configuration (a conflist, or a single plugin's config) uses the
// Kubernetes datastore: the calico binary would then hand every call to
// calico-k8s.
func handsToCalicoK8s(conf []byte) bool {
	var c struct {
		Type    string            `json:"type"`
		Plugins []json.RawMessage `json:"plugins"`
	}
	if json.Unmarshal(conf, &c) != nil {
		return false
	}
	plugins := c.Plugins
	if c.Type != "" {
		plugins = append(plugins, conf)
	}
	for _, p := range plugins {
		var t struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(p, &t) == nil && t.Type == "calico" {
			if k, _ := netconf.DatastoreOf(p); k {
				return true
			}
		}
	}
	return false
}

// installCalicoK8sAsCalico puts calico-k8s in calico's place when the
// network configuration uses the Kubernetes datastore: the lean calico
// binary would start only to exec calico-k8s, a second process start on
// every pod's ADD and DEL (~5 ms). Only when calico was installed by this
// run and calico-k8s is in the image (not skipped). It reports whether
// it did.
func installCalicoK8sAsCalico(c Config, conf []byte, installed []string) (bool, error) {
	if !handsToCalicoK8s(conf) || !slices.Contains(installed, "calico") || slices.Contains(c.SkipBinaries, "calico-k8s") {
		return false, nil
	}
	if err := copyFileAtomic(filepath.Join(c.SourceDir, "calico-k8s"), filepath.Join(c.BinDir, "calico"), 0o755); err != nil {
		return false, err
	}
	return true, nil
}
