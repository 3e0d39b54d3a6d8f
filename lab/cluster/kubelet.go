package cluster

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// kubeletConfig is node n's KubeletConfiguration: cgroupfs (no systemd
// here) under the node's own cgroupRoot, cgroup v1 allowed (the host is a
// v1/v2 hybrid), swap allowed, no resolv.conf, anonymous read access for
// the API server's exec/logs (a lab), and eviction and image GC relaxed so
// the shared disk never evicts pods or the imported images. With the
// cluster DNS, clusterDNS is its Service's address.
func (c *Cluster) kubeletConfig(n NodeState) string { return c.kubeletConfigFor(n, c.cgroupRoot(n)) }

// kubeletConfigFor is the KubeletConfiguration with cgroupRoot root (a VM
// node's kubelet owns its machine: "/").
func (c *Cluster) kubeletConfigFor(n NodeState, root string) string {
	dns := ""
	if c.State.DNS {
		dns = "clusterDNS: [" + dnsServiceIP + "]\n"
	}
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %s
failSwapOn: false
failCgroupV1: false
resolvConf: ""
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
clusterDomain: cluster.local
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
%s`, root, dns)
}

// kubeProxyConfig is node n's KubeProxyConfiguration: iptables mode, and
// no conntrack settings (they are global to the machine).
func kubeProxyConfig(n NodeState, kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
clusterCIDR: %s
mode: iptables
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`, kubeconfig, n.Name, podCIDR)
}

// startKubelet starts node n's kubelet and kube-proxy.
func (c *Cluster) startKubelet(n NodeState, p *pki, tok tokens) error {
	server := fmt.Sprintf("https://%s:%d", cpAddr, apiPort)
	files := map[string]string{
		"kubelet.yaml":       c.kubeletConfig(n),
		"kubelet.kubeconfig": kubeconfig(server, p.CAFile, tok.Nodes[n.Name]),
		"proxy.kubeconfig":   kubeconfig(server, p.CAFile, tok.Proxy),
	}
	files["kube-proxy.yaml"] = kubeProxyConfig(n, filepath.Join(n.Dir, "proxy.kubeconfig"))
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	if err := c.spawnKubelet(n); err != nil {
		return err
	}
	return c.spawnKubeProxy(n)
}

// spawnKubelet starts node n's kubelet from the files startKubelet wrote
// (also when a node comes back: power restored, re-added).
func (c *Cluster) spawnKubelet(n NodeState) error {
	ip := netip.MustParsePrefix(n.Addr).Addr().String()
	_, err := c.spawn("kubelet-"+n.Name, inNode(n, filepath.Join(c.KubeBin, "kubelet"),
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"), "--kubeconfig="+filepath.Join(n.Dir, "kubelet.kubeconfig"),
		"--hostname-override="+n.Name, "--node-ip="+ip)...)
	return err
}

// spawnKubeProxy starts node n's kube-proxy.
func (c *Cluster) spawnKubeProxy(n NodeState) error {
	_, err := c.spawn("kube-proxy-"+n.Name, inNode(n, filepath.Join(c.KubeBin, "kube-proxy"),
		"--config="+filepath.Join(n.Dir, "kube-proxy.yaml"))...)
	return err
}
