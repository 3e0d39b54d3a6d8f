package plugin

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/tabbynet/tabby/cni-plugin/cnilog"
	"github.com/tabbynet/tabby/lib/calicolog"
)

// command is one of the plugin's commands; done are attributes for the
// log's last line (ADD: the addresses it gave the pod).
type command func(*skel.CmdArgs) (done []any, err error)

// plain is a command with nothing to add to the log's last line.
func plain(f func(*skel.CmdArgs) error) command {
	return func(a *skel.CmdArgs) ([]any, error) { return nil, f(a) }
}

// logged wraps one command with the plugin's log, configured by the
// network configuration's log_level, log_file_path and rotation keys as
// Calico's plugin is (see cni-plugin/cnilog), in Calico's format
// (TABBY_LOG_FORMAT=json for JSON lines): the call and its outcome at INFO
// (a failure at ERROR), each naming the container and interface, the last
// line of an ADD also the addresses; the configuration at DEBUG.
func (p *Plugin) logged(cmd string, f command) func(*skel.CmdArgs) error {
	return func(a *skel.CmdArgs) error {
		var stderr io.Writer = os.Stderr
		if p.LogStderr != nil {
			stderr = p.LogStderr
		}
		log, closeLog := cnilog.Open(cnilog.FromConfig(a.StdinData), "cni-plugin", calicolog.JSONFromEnv(os.Getenv), stderr, time.Now)
		defer closeLog()
		log = log.With("command", cmd, "containerID", a.ContainerID, "ifName", a.IfName)
		log.Info("calico CNI plugin called", "netns", a.Netns, "args", a.Args)
		log.Debug("network configuration", "config", string(a.StdinData))
		for _, r := range refusedNetconf(a.StdinData) {
			log.Error("CNI setting refused", "setting", r[0], "reason", r[1])
		}
		start := time.Now()
		done, err := f(a)
		if err != nil {
			log.Error("calico CNI plugin failed", "error", err, "duration", time.Since(start))
			return err
		}
		log.Info("calico CNI plugin done", append(done, "duration", time.Since(start))...)
		return nil
	}
}

// netconfRefused are the keys of Calico's plugin configuration that
// Tabby's plugin does not implement, with what it does instead; each one
// set (not to its zero value) is logged at ERROR on every call. The keys
// the plugin implements are those of netconf.NetConf.
var netconfRefused = []struct{ path, reason string }{
	{"mode", "Windows only: the plugin wires veth pairs"},
	{"vxlan_mac_prefix", "Windows only: the plugin wires veth pairs"},
	{"vxlan_vni", "Windows only: the plugin wires veth pairs"},
	{"windows_use_single_network", "Windows only"},
	{"windows_disable_default_deny_all_policy", "Windows only"},
	{"windows_loopback_DSR", "Windows only"},
	{"windows_pod_deletion_timestamp_timeout", "Windows only"},
	{"qps", "the plugin's Kubernetes client uses client-go's rate limits"},
	{"burst", "the plugin's Kubernetes client uses client-go's rate limits"},
	{"ipam_lock_file", "calico-ipam serialises through the datastore, with no host lock file"},
	{"etcd_scheme", "the scheme is part of etcd_endpoints"},
	{"etcd_authority", "use etcd_endpoints"},
	{"hostname", "use nodename"},
	{"dataplane_options", "the plugin has one dataplane (veth and routes)"},
	{"device_type", "the plugin wires veth pairs only"},
	{"readiness_gates", "the plugin does not wait for readiness gates (see policy_setup_timeout_seconds)"},
	{"require_mtu_file", "the plugin does not wait for felix's MTU file"},
	{"calico_api_group", "the Kubernetes datastore uses crd.projectcalico.org/v1"},
	{"policy.k8s_api_root", "the policy section's Kubernetes access is not used: the kubernetes section is"},
	{"policy.k8s_auth_token", "the policy section's Kubernetes access is not used: the kubernetes section is"},
	{"policy.k8s_client_certificate", "the policy section's Kubernetes access is not used: the kubernetes section is"},
	{"policy.k8s_client_key", "the policy section's Kubernetes access is not used: the kubernetes section is"},
	{"policy.k8s_certificate_authority", "the policy section's Kubernetes access is not used: the kubernetes section is"},
	{"kubernetes.node_name", "use nodename"},
}

// refusedNetconf lists the refused keys set in a network configuration.
func refusedNetconf(stdin []byte) [][2]string {
	var top map[string]json.RawMessage
	if json.Unmarshal(stdin, &top) != nil {
		return nil
	}
	isSet := func(raw json.RawMessage) bool {
		v := bytes.TrimSpace(raw)
		for _, zero := range []string{"", "null", "false", "0", `""`, "[]", "{}"} {
			if string(v) == zero {
				return false
			}
		}
		return string(v) != `"veth"`
	}
	var out [][2]string
	for _, r := range netconfRefused {
		section, key, nested := strings.Cut(r.path, ".")
		raw := top[section]
		if nested {
			var sub map[string]json.RawMessage
			if json.Unmarshal(raw, &sub) != nil {
				continue
			}
			raw = sub[key]
		}
		if raw != nil && isSet(raw) {
			out = append(out, [2]string{r.path, r.reason})
		}
	}
	return out
}
