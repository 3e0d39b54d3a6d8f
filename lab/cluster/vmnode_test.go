package cluster

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlanVMNodes: VM nodes are vm-1.. on subnet 0 from .101, apart from
// the namespace nodes' addresses, and every node gets a kubelet token.
func TestPlanVMNodes(t *testing.T) {
	s := State{Nodes: planNodes("/st", "tk1", 3, 2), VMNodes: planVMNodes("/st", 2)}
	if v := s.VMNodes[1]; v.Name != "vm-2" || v.ID != 2 || v.Addr != "10.77.0.102/24" || v.Dir != "/st/vms/vm-2" {
		t.Errorf("vm-2 planned as %+v", v)
	}
	for _, n := range s.Nodes {
		for _, v := range s.VMNodes {
			if n.Addr == v.Addr {
				t.Errorf("%s and %s share %s", n.Name, v.Name, n.Addr)
			}
		}
	}
	names := s.nodeNames()
	if !slices.Equal(names, []string{"node-1", "node-2", "node-3", "vm-1", "vm-2"}) {
		t.Errorf("node names %v", names)
	}
	if tok := newTokens(names); len(tok.Nodes) != 5 || !strings.Contains(tok.csv(), ",system:node:vm-2,") {
		t.Errorf("tokens %v", tok.csv())
	}
}

// TestVMNodeEnv: the guest mounts each host folder once (the image
// tarballs' folders deduplicated), and node.env names them with the
// node's address, router and the tarballs in import order.
func TestVMNodeEnv(t *testing.T) {
	tars := []string{"/st/images/pause.tar", "/st/images/agnhost.tar", "/repo/bin/tabby-image.tar"}
	shares := vmShares("/kube", "/repo/bin", tars)
	want := []vmShare{{"h0", "/kube"}, {"h1", "/repo/bin"}, {"h2", "/st/images"}}
	if !slices.Equal(shares, want) {
		t.Errorf("shares %v, want %v", shares, want)
	}
	env := vmNodeEnv(planVMNodes("/st", 1)[0], "/st", "/kube", "/repo/bin", shares, tars)
	for _, line := range []string{"NAME=vm-1", "ADDR=10.77.0.101/24", "GW=10.77.0.1", "STATE=/st", "DIR=/st/vms/vm-1",
		"SHARES='h0=/kube h1=/repo/bin h2=/st/images'", "TARS='/st/images/pause.tar /st/images/agnhost.tar /repo/bin/tabby-image.tar'"} {
		if !strings.Contains(env, line+"\n") {
			t.Errorf("node.env lacks %q:\n%s", line, env)
		}
	}
}

// TestE2EArgsVMNodesOnly: a run on the VM nodes only names the namespace
// nodes' taint as non-blocking and counts every node; the SCTP focus
// selects the SCTP specs only.
func TestE2EArgsVMNodesOnly(t *testing.T) {
	c := &Cluster{Dir: "/st", State: State{Kubeconfig: "/st/admin.kubeconfig", Nodes: planNodes("/st", "tk1", 2, 2), VMNodes: planVMNodes("/st", 1)}}
	o := E2EOptions{E2EBin: "/e2e", Focus: NetpolSCTPFocus, VMNodesOnly: true}
	o.defaults(c.Dir)
	args := strings.Join(c.e2eArgs(o), " ")
	for _, want := range []string{"--non-blocking-taints=" + NamespaceNodeTaint, "--num-nodes=3"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q: %s", want, args)
		}
	}
	o.VMNodesOnly = false
	if strings.Contains(strings.Join(c.e2eArgs(o), " "), "non-blocking-taints") {
		t.Error("a run on every node names a non-blocking taint")
	}
	re := regexp.MustCompile(NetpolSCTPFocus)
	sctp := "[sig-network] Netpol [Feature:SCTPConnectivity] [LinuxOnly] NetworkPolicy between server and client using SCTP should enforce policy based on Ports [Feature:NetworkPolicy]"
	tcp := "[sig-network] Netpol NetworkPolicy between server and client should enforce policy based on Ports [Feature:NetworkPolicy]"
	if !re.MatchString(sctp) || re.MatchString(tcp) {
		t.Errorf("focus %q: SCTP spec %v, TCP spec %v", NetpolSCTPFocus, re.MatchString(sctp), re.MatchString(tcp))
	}
}

// TestVMProbes: each VM pod reaches every namespace node's pod and back
// over TCP, and the VM pods each other over SCTP (itself when alone).
func TestVMProbes(t *testing.T) {
	pod := func(n string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n}} }
	v1, v2, n1 := pod("vm-1"), pod("vm-2"), pod("node-1")
	count := func(ps []vmProbe) map[string]int {
		m := map[string]int{}
		for _, p := range ps {
			m[p.protocol+" "+p.from.Name+">"+p.to.Name]++
		}
		return m
	}
	got := count(vmProbes([]*corev1.Pod{v1}, []*corev1.Pod{n1}))
	if len(got) != 3 || got["tcp vm-1>node-1"] != 1 || got["tcp node-1>vm-1"] != 1 || got["sctp vm-1>vm-1"] != 1 {
		t.Errorf("one VM: %v", got)
	}
	got = count(vmProbes([]*corev1.Pod{v1, v2}, []*corev1.Pod{n1}))
	if len(got) != 6 || got["sctp vm-1>vm-2"] != 1 || got["sctp vm-2>vm-1"] != 1 || got["sctp vm-1>vm-1"] != 0 {
		t.Errorf("two VMs: %v", got)
	}
}
