package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/epstatus"
)

// cniNetwork is the network name of Calico's manifests.
const cniNetwork = "k8s-pod-network"

// cniConfList is node n's 10-calico.conflist, as install-cni writes it
// (kubeconfig: the plugin's, pointing at the API server from inside the
// node's namespace).
func (l *Lab) cniConfList(n *NodeState, kubeconfig string) ([]byte, error) {
	plugin := map[string]any{
		"type": "calico", "log_level": "info", "nodename": n.Name, "mtu": 1400,
		"ipam":                         map[string]any{"type": "calico-ipam"},
		"policy_setup_timeout_seconds": 10,
		"endpoint_status_dir":          filepath.Join(n.Dir, "status", epstatus.DirName),
		"container_settings":           map[string]any{"allow_ip_forwarding": true},
	}
	if l.State.Datastore == DatastoreKubernetes {
		plugin["datastore_type"] = "kubernetes"
		plugin["kubernetes"] = map[string]any{"kubeconfig": kubeconfig}
		plugin["policy"] = map[string]any{"type": "k8s"}
	} else {
		plugin["datastore_type"] = "etcdv3"
		plugin["etcd_endpoints"] = l.State.EtcdUnix
	}
	return json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": cniNetwork, "plugins": []any{plugin}})
}

// createPods creates every pod of the model: with the Kubernetes
// datastore its Pod object first (scheduled to its node, as the scheduler
// leaves it), then a namespace wired by the calico plugin through libcni
// from inside the node's namespace (as containerd runs it), then the
// pod's servers. In etcd mode the pod's labels are copied to its
// WorkloadEndpoint as kube-controllers does.
func (l *Lab) createPods(ctx context.Context) error {
	m := l.State.Model
	nodes := map[string]*NodeState{}
	for i := range l.State.Nodes {
		nodes[l.State.Nodes[i].Name] = &l.State.Nodes[i]
	}
	kubeconfigs := map[string]string{}
	if l.State.Datastore == DatastoreKubernetes {
		if err := l.createPodObjects(ctx); err != nil {
			return err
		}
		for i := range l.State.Nodes {
			kubeconfigs[l.State.Nodes[i].Name] = nodeKubeconfig(&l.State.Nodes[i])
		}
	}
	pods := make([]PodState, len(m.Pods))
	var mu sync.Mutex
	err := parallel(len(m.Pods), func(i int) error {
		p := m.Pods[i]
		n := nodes[p.Node]
		ps := PodState{Namespace: p.Namespace, Name: p.Name, Node: p.Node, Ports: p.Ports,
			Netns: l.State.Prefix + "-p-" + p.Namespace + "-" + p.Name, ContainerID: l.State.Prefix + "-" + p.Namespace + "-" + p.Name}
		h, err := createNetns(ps.Netns)
		if err != nil {
			return err
		}
		h.Close()
		ip, err := l.cniAdd(ctx, n, &ps, kubeconfigs[n.Name])
		if err != nil {
			return err
		}
		ps.IP = ip
		if l.State.Datastore == DatastoreEtcd {
			if err := l.labelEndpoint(ctx, p); err != nil {
				return err
			}
		} else if err := l.podRunning(ctx, p, n, ip); err != nil {
			return err
		}
		if err := l.startServers(ps); err != nil {
			return err
		}
		mu.Lock()
		pods[i] = ps
		mu.Unlock()
		return nil
	})
	l.State.Pods = nil
	for _, p := range pods {
		if p.Name != "" {
			l.State.Pods = append(l.State.Pods, p)
		}
	}
	if serr := l.save(); err == nil {
		err = serr
	}
	return err
}

func (l *Lab) cniAdd(ctx context.Context, n *NodeState, p *PodState, kubeconfig string) (string, error) {
	conf, err := l.cniConfList(n, kubeconfig)
	if err != nil {
		return "", err
	}
	list, err := libcni.ConfListFromBytes(conf)
	if err != nil {
		return "", err
	}
	// The plugin logs each call on stderr (and Calico's log_file_path):
	// into the node's CNI log, as a runtime's journal would keep it.
	logs := filepath.Join(l.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return "", err
	}
	logf, err := os.OpenFile(filepath.Join(logs, "cni-"+n.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	runner := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: logf}, PluginDecoder: version.PluginDecoder{}}
	cni := libcni.NewCNIConfigWithCacheDir([]string{l.Bin}, filepath.Join(n.Dir, "cni-cache"), runner)
	rt := &libcni.RuntimeConf{ContainerID: p.ContainerID, NetNS: netnsPath(p.Netns), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", p.Namespace}, {"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ContainerID}}}
	h, err := openNetns(n.Netns)
	if err != nil {
		return "", err
	}
	defer h.Close()
	var res *current.Result
	var addErr error
	if err := h.Do(func(ns.NetNS) error {
		r, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			addErr = err
			return nil
		}
		res, addErr = current.NewResultFromResult(r)
		return nil
	}); err != nil {
		return "", err
	}
	if addErr != nil {
		return "", fmt.Errorf("CNI ADD of pod %s on %s (the plugin's log: %s): %w", p.Key(), n.Name, logf.Name(), addErr)
	}
	for _, ip := range res.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP.To4()); ok {
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("CNI ADD of pod %s gave no IPv4 address: %v", p.Key(), res)
}

// labelEndpoint gives the pod's WorkloadEndpoint the pod's labels, as
// kube-controllers' workload-endpoint-label controller does in etcd mode,
// and its service account (every lab pod runs as its namespace's
// "default"), as Calico's CNI plugin records it from the pod.
func (l *Lab) labelEndpoint(ctx context.Context, p Pod) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		weps, err := c.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: p.Namespace})
		if err != nil {
			return err
		}
		var wep *v3.WorkloadEndpoint
		for _, w := range weps.Items {
			if w := w.(*v3.WorkloadEndpoint); w.Spec.Pod == p.Name {
				wep = w
			}
		}
		if wep == nil {
			return fmt.Errorf("no WorkloadEndpoint for pod %s after CNI ADD", p.Key())
		}
		labels := map[string]string{}
		for k, v := range p.Labels {
			labels[k] = v
		}
		labels["projectcalico.org/namespace"] = p.Namespace
		labels["projectcalico.org/orchestrator"] = "k8s"
		labels["projectcalico.org/serviceaccount"] = "default"
		wep.Labels = labels
		wep.Spec.ServiceAccountName = "default"
		for _, pt := range p.Ports {
			proto := strings.ToUpper(pt.Protocol)
			wep.Spec.Ports = append(wep.Spec.Ports, v3.WorkloadEndpointPort{Name: pt.Name, Protocol: numorstring.ProtocolFromString(proto), Port: uint16(pt.Port)})
		}
		_, err = c.Update(ctx, wep)
		if err == nil {
			return nil
		}
		if attempt > 5 {
			return fmt.Errorf("labelling the endpoint of pod %s: %w", p.Key(), err)
		}
	}
}

// createPodObjects creates the model's Pods, scheduled to their nodes.
func (l *Lab) createPodObjects(ctx context.Context) error {
	kc, err := l.kube()
	if err != nil {
		return err
	}
	for _, p := range l.State.Model.Pods {
		var ports []corev1.ContainerPort
		for _, pt := range p.Ports {
			ports = append(ports, corev1.ContainerPort{Name: pt.Name, ContainerPort: int32(pt.Port), Protocol: corev1.Protocol(pt.Protocol)})
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
			Spec: corev1.PodSpec{NodeName: p.Node, Containers: []corev1.Container{{Name: "serve", Image: "tabby-lab", Ports: ports}}}}
		if p.IP != "" {
			pod.Annotations = map[string]string{"cni.projectcalico.org/ipAddrs": fmt.Sprintf(`[%q]`, p.IP)}
		}
		if _, err := kc.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s: %w", p.Key(), err)
		}
	}
	return nil
}

// podRunning reports the pod Running with its IP, as the kubelet does once
// the sandbox is up.
func (l *Lab) podRunning(ctx context.Context, p Pod, n *NodeState, ip string) error {
	kc, err := l.kube()
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		pod, err := kc.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodRunning
		pod.Status.HostIP = peerAddr(*n)
		pod.Status.PodIP = ip
		pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		now := metav1.NewTime(time.Now())
		pod.Status.StartTime = &now
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "serve", Ready: true, Image: "tabby-lab", ImageID: "tabby-lab",
			ContainerID: "tabby-lab://" + p.Namespace + "-" + p.Name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}}
		_, err = kc.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if attempt > 5 {
			return fmt.Errorf("pod %s status: %w", p.Key(), err)
		}
	}
}

// startServers runs `tabby-lab serve` inside the pod's namespace: a TCP
// and a UDP server on each of its ports.
func (l *Lab) startServers(p PodState) error {
	var ports []string
	for _, pt := range p.Ports {
		ports = append(ports, pt.String())
	}
	_, err := l.spawn("serve-"+p.Namespace+"-"+p.Name, p.Netns, nil, filepath.Join(l.Bin, "tabby-lab"),
		"serve", "--id", p.Key(), "--ports", strings.Join(ports, ","))
	return err
}
