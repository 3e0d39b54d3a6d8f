package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tabbynet/tabby/cni-plugin/wiring"
)

// The chaos run's leak check, once the cluster has settled: IPAM
// (calicoctl ipam check: leaked addresses, blocks of deleted nodes,
// empty unowned blocks, orphan handles, inconsistencies; and the number
// of allocations against the pods' and tunnels' addresses), the
// WorkloadEndpoints against the pods, and on every node the kernel's
// veths, routes and endpoint chains against the node's pods.

var (
	problemsLine = regexp.MustCompile(`found (\d+) problem`)
	allocsLine   = regexp.MustCompile(`Found (\d+) allocations`)
	endpointRef  = regexp.MustCompile(`cali-[tf]w-(cali[0-9a-f]{11})\b`)
)

// Leaks lists every leak found (none: clean).
func (c *Cluster) Leaks(ctx context.Context, kc kubernetes.Interface) ([]string, error) {
	pods, err := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var livePods []*corev1.Pod
	for i := range pods.Items {
		if live(&pods.Items[i]) {
			livePods = append(livePods, &pods.Items[i])
		}
	}
	tunnels := 0
	for _, n := range nodes.Items {
		if n.Annotations["projectcalico.org/IPv4VXLANTunnelAddr"] != "" || n.Annotations["projectcalico.org/IPv4IPIPTunnelAddr"] != "" {
			tunnels++
		}
	}
	leaks, err := c.ipamLeaks(ctx, len(livePods)+tunnels)
	if err != nil {
		return nil, err
	}
	weps, err := c.wepLeaks(ctx, livePods)
	if err != nil {
		return nil, err
	}
	leaks = append(leaks, weps...)
	for _, n := range c.State.Nodes {
		k, err := nodeKernelLeaks(n, livePods)
		if err != nil {
			return nil, err
		}
		leaks = append(leaks, k...)
	}
	return leaks, nil
}

// ipamLeaks runs calicoctl ipam check (no grace: nothing is being set
// up once settled) and compares its allocations with want.
func (c *Cluster) ipamLeaks(ctx context.Context, want int) ([]string, error) {
	out, err := c.calicoctl(ctx, "ipam", "check", "--grace=0s")
	if err != nil {
		return nil, err
	}
	var leaks []string
	m := problemsLine.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("calicoctl ipam check: no summary in %q", out)
	}
	if m[1] != "0" {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "  ") || (strings.HasPrefix(l, "Found ") && !strings.HasPrefix(l, "Found 0 ") && !allocsLine.MatchString(l)) {
				leaks = append(leaks, "ipam check: "+strings.TrimSpace(l))
			}
		}
	}
	got := "no"
	if a := allocsLine.FindStringSubmatch(out); a != nil {
		got = a[1]
	}
	if got != strconv.Itoa(want) {
		leaks = append(leaks, fmt.Sprintf("ipam: %s allocations, want %d (live pods' and tunnels' addresses)", got, want))
	}
	return leaks, nil
}

// wepLeaks compares the WorkloadEndpoints with the live pods.
func (c *Cluster) wepLeaks(ctx context.Context, livePods []*corev1.Pod) ([]string, error) {
	out, err := c.calicoctl(ctx, "get", "workloadendpoints", "-A", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Namespace string }
			Spec     struct{ Pod string }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("calicoctl get workloadendpoints: %w: %.200s", err, out)
	}
	var got []string
	for _, w := range list.Items {
		got = append(got, w.Metadata.Namespace+"/"+w.Spec.Pod)
	}
	var want []string
	for _, p := range livePods {
		want = append(want, p.Namespace+"/"+p.Name)
	}
	return setDiff("WorkloadEndpoint", got, want), nil
}

// nodeKernelLeaks compares node n's cali veths, routes to them and
// endpoint chains with the live pods the API places on it.
func nodeKernelLeaks(n NodeState, livePods []*corev1.Pod) ([]string, error) {
	var veths, ips []string
	for _, p := range livePods {
		if p.Spec.NodeName == n.Name {
			veths = append(veths, wiring.HostVethName(p.Namespace, p.Name))
			ips = append(ips, p.Status.PodIP)
		}
	}
	links, err := run("ip", "-n", n.Netns, "-o", "link", "show")
	if err != nil {
		return nil, err
	}
	var gotVeths []string
	for _, l := range strings.Split(links, "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], "cali") {
			gotVeths = append(gotVeths, strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		}
	}
	routes, err := run("ip", "-n", n.Netns, "-4", "route", "show")
	if err != nil {
		return nil, err
	}
	var gotIPs []string
	for _, l := range strings.Split(routes, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[1] == "dev" && strings.HasPrefix(f[2], "cali") {
			gotIPs = append(gotIPs, strings.TrimSuffix(f[0], "/32"))
		}
	}
	rules, err := run("nsenter", "--net="+netnsPath(n.Netns), "--", "nft", "list", "ruleset")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var gotChains []string
	for _, m := range endpointRef.FindAllStringSubmatch(rules, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			gotChains = append(gotChains, m[1])
		}
	}
	out := setDiff(n.Name+" veth", gotVeths, veths)
	out = append(out, setDiff(n.Name+" route", gotIPs, ips)...)
	return append(out, setDiff(n.Name+" endpoint chains of", gotChains, veths)...), nil
}

// setDiff names what got has that want lacks (leaked) and the reverse
// (missing).
func setDiff(what string, got, want []string) []string {
	in := func(s []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range s {
			m[x] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var out []string
	for x := range g {
		if !w[x] {
			out = append(out, fmt.Sprintf("%s %s leaked", what, x))
		}
	}
	for x := range w {
		if !g[x] {
			out = append(out, fmt.Sprintf("%s %s missing", what, x))
		}
	}
	sort.Strings(out)
	return out
}

// calicoctl runs the cluster's calicoctl (beside tabby-lab in Bin).
func (c *Cluster) calicoctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "calicoctl"), args...)
	cmd.Env = append(cmd.Environ(), c.ClientEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("calicoctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
