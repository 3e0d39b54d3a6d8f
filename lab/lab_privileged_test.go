//go:build privileged

package lab

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/lab/internal/harness"
)

// TestPrivilegedLabEtcd: the default model on etcd: every pod reaches
// every other on every port; the sample Kubernetes NetworkPolicies
// (stored as kube-controllers stores them) give the expected table on
// the first probe after apply returns; deleted, all is allowed again;
// down leaves nothing.
func TestPrivilegedLabEtcd(t *testing.T) {
	l, start := upLab(t, DefaultModel(), DatastoreEtcd)
	if got := len(l.State.Pods); got != 9 {
		t.Fatalf("%d pods, want the 9 of the default model", got)
	}
	// The plugin's own log goes to the node's CNI log, not up's output.
	for _, n := range l.State.Nodes {
		b, err := os.ReadFile(filepath.Join(l.Dir, "logs", "cni-"+n.Name+".log"))
		if err != nil || strings.Count(string(b), "calico CNI plugin done") != 3 {
			t.Errorf("%s's CNI log: %v\n%s\nwant the 3 ADDs of its pods", n.Name, err, b)
		}
	}
	policyStory(t, l, start)
}

// TestPrivilegedLabLeavesRootNamespaceAlone: with a lab up and a policy
// applied, the root namespace has no Calico chain, ipset, route or link,
// and its forwarding setting is what it was.
func TestPrivilegedLabLeavesRootNamespaceAlone(t *testing.T) {
	fwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	l, _ := upLab(t, DefaultModel(), DatastoreEtcd)
	applyAndWait(t, l, readExample(t, "deny-x-allow-from-y.yaml"), false)
	for _, c := range [][]string{{"iptables-save"}, {"ipset", "list", "-n"}, {"ip", "-o", "link"}, {"ip", "route"}} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v: %s", c, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "cali") || strings.Contains(line, l.State.Prefix) || strings.Contains(line, "10.200.") {
				t.Errorf("root namespace, %s: %s", strings.Join(c, " "), line)
			}
		}
	}
	if now, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); string(now) != string(fwd) {
		t.Errorf("root ip_forward %q, was %q", now, fwd)
	}
	downAndCheck(t, l)
}

// TestPrivilegedLabKubernetes: the same story on the real kube-apiserver:
// Pod objects first, scheduled to their nodes, annotated by the CNI
// plugin with their address; NetworkPolicies through the Kubernetes API.
func TestPrivilegedLabKubernetes(t *testing.T) {
	l, start := upLab(t, DefaultModel(), DatastoreKubernetes)
	kc, err := l.kube()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.State.Pods {
		pod, err := kc.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != p.Node || pod.Annotations["cni.projectcalico.org/podIP"] != p.IP+"/32" || pod.Status.PodIP != p.IP {
			t.Errorf("pod %s: node %q, podIP annotation %q, status %q; want %s, %s", p.Key(), pod.Spec.NodeName,
				pod.Annotations["cni.projectcalico.org/podIP"], pod.Status.PodIP, p.Node, p.IP)
		}
	}
	policyStory(t, l, start)
}

// TestPrivilegedLabFixedIP: the README's example model
// (examples/model.yaml: two subnets, a VXLAN CrossSubnet pool, a
// database serving only 5432 at a fixed address through its ipAddrs
// annotation) comes up on the Kubernetes datastore and every pod is
// probed on exactly the ports it serves; etcd mode refuses the fixed
// address.
func TestPrivilegedLabFixedIP(t *testing.T) {
	m, err := LoadModel(filepath.Join("examples", "model.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Up(context.Background(), UpOptions{Dir: stateDir(t), Bin: labBin(t), Model: m}); err == nil || !strings.Contains(err.Error(), "needs --datastore kubernetes") {
		t.Fatalf("etcd mode with a fixed ip: %v, want a refusal", err)
	}
	l, _ := upLab(t, m, DatastoreKubernetes)
	fixed := false
	for _, p := range l.State.Pods {
		if p.Key() == "db/postgres" {
			fixed = true
			if p.IP != "10.210.99.5" {
				t.Fatalf("pod db/postgres got %s, want 10.210.99.5", p.IP)
			}
		}
	}
	if !fixed {
		t.Fatalf("no pod db/postgres in the example model: %+v", l.State.Pods)
	}
	probeUntil(t, l, allAllowed, 30*time.Second)
	checkProbedPorts(t, l, probeExactly(t, l, allAllowed))
	downAndCheck(t, l)
}

// TestPrivilegedLabVXLAN: a VXLAN pool (no BGP: calico-node's vxlan
// backend, no BIRD): felix's routes over vxlan.calico carry the traffic,
// and the policy story holds.
func TestPrivilegedLabVXLAN(t *testing.T) {
	m := DefaultModel()
	m.Pools = []Pool{{Name: "vxlan", Spec: v3.IPPoolSpec{CIDR: "10.201.0.0/16", VXLANMode: v3.VXLANModeAlways, IPIPMode: v3.IPIPModeNever, BlockSize: 26}}}
	l, start := upLab(t, m, DatastoreEtcd)
	if b := l.State.Model.networkingBackend(); b != "vxlan" {
		t.Fatalf("backend %s for a VXLAN-only model", b)
	}
	probeUntil(t, l, allAllowed, 30*time.Second)
	for _, n := range l.State.Nodes {
		h, err := openNetns(n.Netns)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.NL.LinkByName("vxlan.calico")
		routes, _ := exec.Command("ip", "-n", n.Netns, "-4", "route", "show", "dev", "vxlan.calico").CombinedOutput()
		h.Close()
		if err != nil {
			t.Fatalf("%s has no vxlan.calico: %v", n.Name, err)
		}
		if strings.Count(string(routes), "10.201.") < len(l.State.Nodes)-1 {
			t.Errorf("%s: routes over vxlan.calico:\n%s\nwant one per other node's block", n.Name, routes)
		}
	}
	policyStory(t, l, start)
}

// TestPrivilegedLabVXLANCrossSubnetTwoSubnets: node0 and node1 on one
// subnet, node2 on another behind the underlay's router; a VXLAN
// CrossSubnet pool: encapsulated only across the subnets.
func TestPrivilegedLabVXLANCrossSubnetTwoSubnets(t *testing.T) {
	m := DefaultModel()
	m.Nodes = Nodes{{Name: "node0"}, {Name: "node1"}, {Name: "node2", Subnet: 1}}
	m.Pools = []Pool{{Name: "vxlan-cs", Spec: v3.IPPoolSpec{CIDR: "10.202.0.0/16", VXLANMode: v3.VXLANModeCrossSubnet, IPIPMode: v3.IPIPModeNever, BlockSize: 26}}}
	l, start := upLab(t, m, DatastoreEtcd)
	probeUntil(t, l, allAllowed, 30*time.Second)
	routes, err := exec.Command("ip", "-n", l.State.Nodes[0].Netns, "-4", "route", "show").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	// A node may hold more than one block (calico-node claims its tunnel
	// address while the pods' ADDs claim theirs): each route is checked
	// by where it goes. node1's blocks directly via node1's address,
	// node2's over vxlan.calico via node2's tunnel address, nothing else.
	node1 := peerAddr(l.State.Nodes[1])
	addr, err := exec.Command("ip", "-n", l.State.Nodes[2].Netns, "-4", "-o", "addr", "show", "dev", "vxlan.calico").CombinedOutput()
	if err != nil {
		t.Fatalf("node2's vxlan.calico: %v\n%s", err, addr)
	}
	f := strings.Fields(string(addr))
	if len(f) < 4 {
		t.Fatalf("node2's vxlan.calico has no address: %s", addr)
	}
	node2Tunnel, _, _ := strings.Cut(f[3], "/")
	var viaTunnel, direct int
	for _, line := range strings.Split(string(routes), "\n") {
		if !strings.HasPrefix(line, "10.202.") || !strings.Contains(line, " via ") {
			continue
		}
		switch {
		case strings.Contains(line, " via "+node2Tunnel+" dev vxlan.calico"):
			viaTunnel++
		case strings.Contains(line, " via "+node1+" dev eth0"):
			direct++
		default:
			t.Errorf("node0's route %q: want node1's blocks via %s dev eth0, node2's via %s dev vxlan.calico", line, node1, node2Tunnel)
		}
	}
	if viaTunnel == 0 || direct == 0 {
		t.Errorf("node0's routes to the other blocks: %d over vxlan.calico to node2, %d direct to node1; want both (node2 across subnets, node1 beside):\n%s", viaTunnel, direct, routes)
	}
	policyStory(t, l, start)
}

// TestPrivilegedLabDownAfterKill: tabby-lab up killed with SIGKILL at
// different points; down then leaves nothing (namespaces, processes, the
// state folder, files in Calico's host folders). After the pods, the
// calico-node agents go on and start BIRD: every BIRD (found by its pid
// file, not by the lab's marker) carries the marker and is gone after down.
func TestPrivilegedLabDownAfterKill(t *testing.T) {
	bin := labBin(t)
	hostPaths := []string{"/var/run/calico", "/var/lib/calico", "/var/log/calico", "/var/lib/cni", "/etc/calico", "/etc/cni"}
	before := map[string]bool{}
	for _, p := range hostPaths {
		_, err := os.Stat(p)
		before[p] = err == nil
	}
	for _, killAt := range []string{"datastore up", "node agents started", "pods wired"} {
		t.Run(strings.ReplaceAll(killAt, " ", "-"), func(t *testing.T) {
			dir := stateDir(t)
			cmd := exec.Command(bin+"/tabby-lab", "--state", dir, "--bin", bin, "up", "--datastore", "kubernetes")
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = cmd.Stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			var seen []string
			for sc.Scan() {
				seen = append(seen, sc.Text())
				if strings.Contains(sc.Text(), killAt) {
					break
				}
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if !strings.Contains(strings.Join(seen, "\n"), killAt) {
				t.Fatalf("up never reached %q:\n%s", killAt, strings.Join(seen, "\n"))
			}
			prefix, err := readPrefix(dir)
			if err != nil || prefix == "" {
				t.Fatalf("no prefix after a killed up: %q %v", prefix, err)
			}
			if left := Leftovers(prefix); len(left) == 0 {
				t.Fatalf("nothing running after up was killed at %q: the test would prove nothing", killAt)
			} else {
				t.Logf("killed at %q: %d namespaces and processes running", killAt, len(left))
			}
			var birds []int
			if killAt == "pods wired" {
				birds = waitBIRDs(t, dir, 3, 60*time.Second)
				marked := map[int]bool{}
				for _, p := range markedProcesses(prefix) {
					marked[p] = true
				}
				for _, p := range birds {
					if !marked[p] {
						t.Errorf("BIRD %d does not carry %s=%s: down would not find it by the marker", p, markerEnv, prefix)
					}
				}
			}
			if err := Down(dir); err != nil {
				t.Fatal(err)
			}
			for _, p := range birds {
				if harness.Alive(p) {
					t.Errorf("BIRD %d still runs after down", p)
				}
			}
			if left := Leftovers(prefix); len(left) > 0 {
				t.Errorf("left after down: %v", left)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("state folder still there: %v", err)
			}
			for _, p := range hostPaths {
				if _, err := os.Stat(p); (err == nil) != before[p] {
					t.Errorf("%s: existed before %v, now %v", p, before[p], err == nil)
				}
			}
		})
	}
}

// waitBIRDs waits until n BIRD processes run for the lab in dir, found by
// the pid files calico-node's supervisor writes next to each node's
// socket (nodes/<node>/bird.pid), and returns their pids.
func waitBIRDs(t *testing.T, dir string, n int, within time.Duration) []int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "nodes", "*", "bird.pid"))
		var pids []int
		for _, f := range files {
			b, _ := os.ReadFile(f)
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || !harness.Alive(pid) {
				continue
			}
			if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "bird" {
				pids = append(pids, pid)
			}
		}
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d BIRD processes after %s, want %d (pid files %v)", len(pids), within, n, files)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
