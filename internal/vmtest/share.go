package vmtest

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/tabbynet/tabby/internal/vmtest/guest"
)

// CNIConfList is the calico plugin's network configuration in a VM: the
// etcd datastore at endpoint (over the segment), calico-ipam, the MTU
// from calico-node's /var/lib/calico/mtu (none set here) and ADD waiting
// for felix's endpoint status at Calico's default path.
func CNIConfList(endpoint string) []byte {
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": []any{map[string]any{
		"type": "calico", "log_level": "info", "log_file_path": "/var/log/calico/cni/cni.log",
		"datastore_type": "etcdv3", "etcd_endpoints": endpoint,
		"ipam": map[string]any{"type": "calico-ipam"}, "policy_setup_timeout_seconds": 20,
	}}})
	return b
}

// GuestNode is node id's entry in the guests' config: its underlay
// address on subnet s, the segment's router as gateway, its NIC's MAC.
func GuestNode(id int, name string, s int) guest.Node {
	return guest.Node{ID: id, Name: name, Addr: NodeAddr(s, id).String(), Gateway: RouterAddr(s).Addr().String(), MAC: NodeMAC(id)}
}

// WriteShare writes config.json and run.sh (which the guest's init runs:
// the agent) into the share.
func WriteShare(share string, cfg guest.Config) error {
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(share, "config.json"), b, 0o644); err != nil {
		return err
	}
	run := "#!/bin/sh\nexec /mnt/share/bin/tabby-vmguest -id \"$1\"\n"
	return os.WriteFile(filepath.Join(share, "run.sh"), []byte(run), 0o755)
}
