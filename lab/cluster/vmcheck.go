package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// vmCheckNamespace holds CheckVMNodes's pods.
const vmCheckNamespace = "tabby-vm-check"

// vmProbe is one connection CheckVMNodes makes: from a pod to another's
// address, by protocol.
type vmProbe struct {
	from, to *corev1.Pod
	protocol string // tcp (port 8080) or sctp (port 80)
}

// vmProbes are the connections that show a VM node on the pod network:
// TCP from each VM node's pod to every other pod and back from each
// namespace node's pod (VXLAN between the VM and the namespace nodes), and
// SCTP between the VM nodes' pods (only their kernel has SCTP), each to
// itself too when there is one VM node.
func vmProbes(vms, others []*corev1.Pod) []vmProbe {
	var out []vmProbe
	for _, v := range vms {
		for _, o := range others {
			out = append(out, vmProbe{v, o, "tcp"}, vmProbe{o, v, "tcp"})
		}
		for _, w := range vms {
			if w != v || len(vms) == 1 {
				out = append(out, vmProbe{v, w, "sctp"})
			}
		}
	}
	return out
}

// portOf is the port agnhost porter serves protocol on in the check's pods.
func portOf(protocol string) string {
	if protocol == "sctp" {
		return "80"
	}
	return "8080"
}

// checkPod is agnhost porter on node: TCP 8080, and SCTP 80 when sctp.
func checkPod(name, node string, sctp bool) *corev1.Pod {
	p := agnPod(vmCheckNamespace, name, node, map[string]string{"app": "tabby-vm-check"})
	p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = E2EAgnhostImage, corev1.PullIfNotPresent
	p.Spec.Containers[0].Args = []string{"porter"}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SERVE_PORT_8080", Value: "tcp"}}
	if sctp {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "SERVE_SCTP_PORT_80", Value: "sctp"})
	}
	return p
}

// CheckVMNodes shows the VM nodes on the pod network: a pod on each VM
// node and on each namespace node, then vmProbes through `kubectl exec`
// of agnhost connect (what the NetworkPolicy e2e probes with; the VMs'
// pods are not in this machine's namespaces), one line each to out. The
// namespace is deleted at the end. Any failed connection is an error.
func (c *Cluster) CheckVMNodes(ctx context.Context, out io.Writer) error {
	if len(c.State.VMNodes) == 0 {
		return errors.New("the cluster has no VM nodes (tabby-lab cluster up --vm-nodes N)")
	}
	kc, err := c.Client()
	if err != nil {
		return err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: vmCheckNamespace}}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() {
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), vmCheckNamespace, metav1.DeleteOptions{})
	}()
	var want []*corev1.Pod
	for _, v := range c.State.VMNodes {
		want = append(want, checkPod(v.Name, v.Name, true))
	}
	for _, n := range c.State.Nodes {
		want = append(want, checkPod(n.Name, n.Name, false))
	}
	var vms, others []*corev1.Pod
	for _, p := range want {
		if _, err := kc.CoreV1().Pods(vmCheckNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i, p := range want {
		running, err := waitRunning(ctx, kc, vmCheckNamespace, p.Name, 5*time.Minute)
		if err != nil {
			return err
		}
		if i < len(c.State.VMNodes) {
			vms = append(vms, running)
		} else {
			others = append(others, running)
		}
	}
	var failed int
	for _, p := range vmProbes(vms, others) {
		t := time.Now()
		addr := net.JoinHostPort(p.to.Status.PodIP, portOf(p.protocol))
		_, err := c.Kubectl(ctx, "-n", vmCheckNamespace, "exec", p.from.Name, "--", "/agnhost", "connect", addr,
			"--timeout=5s", "--protocol="+p.protocol)
		verdict := "connected"
		if err != nil {
			failed++
			verdict = "FAILED: " + err.Error()
		}
		fmt.Fprintf(out, "%-8s %s -> %s (%s) %s in %.1fs\n", p.protocol, p.from.Spec.NodeSelector["kubernetes.io/hostname"],
			p.to.Spec.NodeSelector["kubernetes.io/hostname"], addr, verdict, time.Since(t).Seconds())
	}
	if failed > 0 {
		return fmt.Errorf("%d connections of the VM nodes' pods failed", failed)
	}
	return nil
}
