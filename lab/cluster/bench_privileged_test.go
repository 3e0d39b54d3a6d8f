//go:build privileged

package cluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// podTimes is where one benchmark pod's time went, from `kubectl create`
// to the first answer to a pod on another node.
type podTimes struct {
	start, scheduled, sandboxStart, sandboxDone, conn time.Time
	cniAdd                                            time.Duration
}

// BenchmarkPrivilegedClusterPodReady: on one cluster, per pool mode,
// pods (TABBY_BENCH_PODS, default 50) created one by one with `kubectl
// create` on node-1, each probed from a pod on node-2 (a TCP connect and
// an HTTP answer, every 20 ms) until it answers: p50/p99 of create ->
// first answer, and the medians of where the time goes: API + scheduler
// (create -> spec.nodeName seen by a watch), kubelet (-> containerd's
// RunPodSandbox starts), the sandbox without the CNI ADD, the CNI ADD (the
// plugin's own log), and the rest (containers started, routes and policy
// programmed on both nodes, the probe's period).
func BenchmarkPrivilegedClusterPodReady(b *testing.B) {
	c := testCluster(b, Options{})
	ctx := context.Background()
	kc, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "create", "namespace", "bench"); err != nil {
		b.Fatal(err)
	}
	client := createPods(b, ctx, kc, agnPod("bench", "client", "node-2", nil))[0]
	for _, mode := range []struct{ name, vxlan string }{{"bgp", "Never"}, {"vxlan", "Always"}, {"vxlan-crosssubnet", "CrossSubnet"}} {
		if _, err := c.calicoctl(ctx, "patch", "ippool", "default-ipv4-ippool", "-p", fmt.Sprintf(`{"spec":{"vxlanMode":%q}}`, mode.vxlan)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		var all []podTimes
		for i := 0; i < benchPods(); i++ {
			name := fmt.Sprintf("%s-%d", mode.name, i)
			pt, err := c.timePod(ctx, kc, client, name)
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, pt)
			if _, err := c.Kubectl(ctx, "-n", "bench", "delete", "pod", name, "--wait=true"); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.addSandboxTimes(all, "node-1", mode.name); err != nil {
			b.Fatal(err)
		}
		report(b, mode.name, all)
	}
}

func benchPods() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("TABBY_BENCH_PODS"), &n); err != nil || n <= 0 {
		return 50
	}
	return n
}

// timePod creates pod name on node-1 with kubectl and times it until it
// answers client.
func (c *Cluster) timePod(ctx context.Context, kc kubernetes.Interface, client *corev1.Pod, name string) (podTimes, error) {
	spec, err := yaml.Marshal(agnPod("bench", name, "node-1", nil))
	if err != nil {
		return podTimes{}, err
	}
	w, err := kc.CoreV1().Pods("bench").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return podTimes{}, err
	}
	defer w.Stop()
	var pt podTimes
	pt.start = time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(c.KubeBin, "kubectl"), "--kubeconfig", c.State.Kubeconfig, "create", "-f", "-")
	cmd.Stdin = strings.NewReader(string(spec))
	if out, err := cmd.CombinedOutput(); err != nil {
		return pt, fmt.Errorf("kubectl create: %w: %s", err, out)
	}
	var ip string
	timeout := time.After(2 * time.Minute)
	for ip == "" {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if p.Spec.NodeName != "" && pt.scheduled.IsZero() {
				pt.scheduled = time.Now()
			}
			if p.Status.PodIP != "" {
				ip = p.Status.PodIP
			}
		case <-timeout:
			return pt, fmt.Errorf("pod %s got no address in 2 minutes", name)
		}
	}
	netns, err := c.PodNetns(client)
	if err != nil {
		return pt, err
	}
	defer netns.Close()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		conn, err := Dial(ctx, netns, net.JoinHostPort(ip, "8080"), 200*time.Millisecond)
		if err != nil {
			continue
		}
		got, err := httpGet(conn, "/hostname", 200*time.Millisecond)
		conn.Close()
		if err == nil && got == name {
			pt.conn = time.Now()
			return pt, nil
		}
	}
	return pt, fmt.Errorf("pod %s (%s) never answered", name, ip)
}

var (
	sandboxLine = regexp.MustCompile(`^time="([^"]+)".*msg="RunPodSandbox for &PodSandboxMetadata\{Name:([^,]+),.*?(returns sandbox id)?`)
	cniDoneLine = regexp.MustCompile(`calico CNI plugin done`)
	cniPodName  = regexp.MustCompile(`K8S_POD_NAME=([^;" ]+)`)
	cniDuration = regexp.MustCompile(`duration=(\S+)`)
)

// addSandboxTimes reads when containerd ran each pod's sandbox (its log)
// and how long the CNI ADD took (the plugin's log in the node).
func (c *Cluster) addSandboxTimes(all []podTimes, node, prefix string) error {
	f, err := os.Open(filepath.Join(c.Dir, "logs", "containerd-"+node+".log"))
	if err != nil {
		return err
	}
	defer f.Close()
	start, done := map[string]time.Time{}, map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sandboxLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		if m[3] != "" {
			done[m[2]] = ts
		} else if _, ok := start[m[2]]; !ok {
			start[m[2]] = ts
		}
	}
	adds, err := c.cniAdds(node)
	if err != nil {
		return err
	}
	for i := range all {
		name := fmt.Sprintf("%s-%d", prefix, i)
		all[i].sandboxStart, all[i].sandboxDone, all[i].cniAdd = start[name], done[name], adds[name]
	}
	return nil
}

// cniAdds is the duration of each pod's first successful CNI call (its
// ADD) from the plugin's log file in node.
func (c *Cluster) cniAdds(node string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	f, err := os.Open(filepath.Join(c.Dir, "nodes", node, "var-log", "calico", "cni", "cni.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !cniDoneLine.MatchString(l) {
			continue
		}
		p, d := cniPodName.FindStringSubmatch(l), cniDuration.FindStringSubmatch(l)
		if p == nil || d == nil {
			continue
		}
		if dur, err := time.ParseDuration(d[1]); err == nil {
			if _, seen := out[p[1]]; !seen {
				out[p[1]] = dur
			}
		}
	}
	return out, nil
}

// report prints p50/p99 of create -> first answer and the medians of the
// parts.
func report(b *testing.B, mode string, all []podTimes) {
	part := func(f func(podTimes) time.Duration) time.Duration {
		var ds []time.Duration
		for _, p := range all {
			ds = append(ds, f(p))
		}
		return quantile(ds, 0.5)
	}
	var total []time.Duration
	for _, p := range all {
		total = append(total, p.conn.Sub(p.start))
	}
	p50, p99 := quantile(total, 0.5), quantile(total, 0.99)
	b.ReportMetric(p50.Seconds(), mode+"-p50-s")
	b.ReportMetric(p99.Seconds(), mode+"-p99-s")
	fmt.Printf("%-18s n=%d create->first answer p50 %v p99 %v | medians: api+scheduler %v, kubelet %v, sandbox w/o CNI %v, CNI ADD %v, containers+routes+policy+probe %v\n",
		mode, len(all), p50.Round(time.Millisecond), p99.Round(time.Millisecond),
		part(func(p podTimes) time.Duration { return p.scheduled.Sub(p.start) }).Round(time.Millisecond),
		part(func(p podTimes) time.Duration { return p.sandboxStart.Sub(p.scheduled) }).Round(time.Millisecond),
		part(func(p podTimes) time.Duration { return p.sandboxDone.Sub(p.sandboxStart) - p.cniAdd }).Round(time.Millisecond),
		part(func(p podTimes) time.Duration { return p.cniAdd }).Round(time.Millisecond),
		part(func(p podTimes) time.Duration { return p.conn.Sub(p.sandboxDone) }).Round(time.Millisecond))
}

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
