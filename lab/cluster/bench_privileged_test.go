//go:build privileged

package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/epstatus"
)

// podTimes is where one benchmark pod's time went, from `kubectl create`
// to the first answer to a pod on another node. Times seen by the
// benchmark (start, scheduled, running, conn) are taken when it saw
// them; the others come from containerd's and the plugin's logs and
// felix's endpoint status file on node-1.
type podTimes struct {
	start     time.Time // kubectl create runs
	created   time.Time // a watch sees the pod
	scheduled time.Time // a watch sees spec.nodeName
	sandbox   sandboxTimes
	cni       cniCall
	policy    time.Time // felix wrote the endpoint's status file: its policy is programmed
	running   time.Time // a watch sees the pod's IP (kubelet's status)
	reachable time.Time // the pod's kernel answers a connection (refused or accepted)
	conn      time.Time // the first answer from node-2
}

// BenchmarkPrivilegedClusterPodReady: on one cluster, per pool mode,
// pods (TABBY_BENCH_PODS, default 50) created one by one with `kubectl
// create` on node-1, each probed from a pod on node-2 (a TCP connect and
// an HTTP answer, every 20 ms) from when its address is known until it
// answers: p50/p99 of create -> first answer, and the medians of where the
// time goes: API + scheduler (create -> spec.nodeName seen by a watch),
// kubelet (-> containerd's RunPodSandbox starts), the sandbox before and
// after the CNI ADD, the CNI ADD (the plugin's log), the container start,
// kubelet's status report (-> the watch sees the IP) and the probe until
// it answers; and when felix programmed the pod's policy (its endpoint
// status file) against the ADD's end and the first answer.
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
	clientPod := createPods(b, ctx, kc, agnPod("bench", "client", "node-2", nil))[0]
	client, err := c.PodNetns(clientPod)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	fmt.Printf("load average at start: %s", loadAvg())
	for _, mode := range []struct{ name, vxlan string }{{"vxlan", "Always"}, {"vxlan-crosssubnet", "CrossSubnet"}, {"bgp", "Never"}} {
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
		if err := c.addLogTimes(all, "node-1", mode.name); err != nil {
			b.Fatal(err)
		}
		report(b, mode.name, all)
		fmt.Printf("load average after %s: %s", mode.name, loadAvg())
	}
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return string(b)
}

func benchPods() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("TABBY_BENCH_PODS"), &n); err != nil || n <= 0 {
		return 50
	}
	return n
}

// timePod creates pod name on node-1 with kubectl and times it until it
// answers a probe from client's namespace.
func (c *Cluster) timePod(ctx context.Context, kc kubernetes.Interface, client ns.NetNS, name string) (podTimes, error) {
	pod := agnPod("bench", name, "node-1", nil)
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	spec, err := yaml.Marshal(pod)
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
	// The watch is read while kubectl runs: its events are timed as
	// they come.
	type watched struct {
		ip  string
		err error
	}
	got := make(chan watched, 1)
	go func() {
		ip, err := watchPod(w, &pt)
		got <- watched{ip, err}
	}()
	cmd := exec.CommandContext(ctx, filepath.Join(c.KubeBin, "kubectl"), "--kubeconfig", c.State.Kubeconfig, "create", "-f", "-")
	cmd.Stdin = strings.NewReader(string(spec))
	if out, err := cmd.CombinedOutput(); err != nil {
		w.Stop()
		<-got
		return pt, fmt.Errorf("kubectl create: %w: %s", err, out)
	}
	res := <-got
	ip, err := res.ip, res.err
	if err != nil {
		return pt, fmt.Errorf("pod %s: %w", name, err)
	}
	if err := probeUntilAnswer(ctx, client, ip, name, &pt); err != nil {
		return pt, err
	}
	// The status file goes with the pod: read it now.
	st, err := os.Stat(c.statusFile(name))
	if err != nil {
		return pt, fmt.Errorf("felix's endpoint status file of %s: %w", name, err)
	}
	pt.policy = st.ModTime()
	return pt, nil
}

// watchPod records when the watch first shows the pod, its node and its
// address, and returns the address.
func watchPod(w watch.Interface, pt *podTimes) (string, error) {
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", errors.New("the watch ended")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			if pt.created.IsZero() {
				pt.created = now
			}
			if p.Spec.NodeName != "" && pt.scheduled.IsZero() {
				pt.scheduled = now
			}
			if p.Status.PodIP != "" {
				pt.running = now
				return p.Status.PodIP, nil
			}
		case <-timeout:
			return "", errors.New("no address in 2 minutes")
		}
	}
}

// probeUntilAnswer connects from client to ip:8080 every 20 ms until the
// pod answers with its name, recording the first connection the pod's
// kernel answered (refused: nothing listens yet; or accepted) and the
// first answer.
func probeUntilAnswer(ctx context.Context, client ns.NetNS, ip, name string, pt *podTimes) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		conn, err := Dial(ctx, client, net.JoinHostPort(ip, "8080"), 200*time.Millisecond)
		if pt.reachable.IsZero() && (err == nil || errors.Is(err, syscall.ECONNREFUSED)) {
			pt.reachable = time.Now()
		}
		if err != nil {
			continue
		}
		got, err := httpGet(conn, "/hostname", 200*time.Millisecond)
		conn.Close()
		if err == nil && got == name {
			pt.conn = time.Now()
			return nil
		}
	}
	return fmt.Errorf("pod %s (%s) never answered", name, ip)
}

// statusFile is felix's endpoint status file of pod bench/name on node-1.
func (c *Cluster) statusFile(name string) string {
	wep := &v3.WorkloadEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "bench"},
		Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Pod: name, Endpoint: "eth0"}}
	return filepath.Join(c.State.Nodes[0].Dir, "run-calico", epstatus.DirName, epstatus.Filename(wep))
}

// addLogTimes reads when containerd ran each pod's sandbox and started
// its container (its log) and when the CNI ADD ran (the plugin's log in
// node).
func (c *Cluster) addLogTimes(all []podTimes, node, prefix string) error {
	f, err := os.Open(filepath.Join(c.Dir, "logs", "containerd-"+node+".log"))
	if err != nil {
		return err
	}
	defer f.Close()
	sandboxes := parseContainerdLog(f)
	g, err := os.Open(filepath.Join(c.Dir, "nodes", node, "var-log", "calico", "cni", "cni.log"))
	if err != nil {
		return err
	}
	defer g.Close()
	adds := parseCNILog(g)
	for i := range all {
		name := fmt.Sprintf("%s-%d", prefix, i)
		sb := sandboxes[name]
		if sb == nil || sb.containerStart.IsZero() {
			return fmt.Errorf("containerd's log lacks the sandbox or container start of %s", name)
		}
		add, ok := adds[sb.id]
		if !ok {
			return fmt.Errorf("the CNI log lacks the ADD of %s (sandbox %s)", name, sb.id)
		}
		all[i].sandbox, all[i].cni = *sb, add
	}
	return nil
}

// report prints p50/p99 of create -> first answer and the medians of the
// parts.
func report(b *testing.B, mode string, all []podTimes) {
	med := func(f func(podTimes) time.Duration) time.Duration { return quant(all, 0.5, f).Round(time.Millisecond) }
	var total []time.Duration
	for _, p := range all {
		total = append(total, p.conn.Sub(p.start))
	}
	p50, p99 := quantile(total, 0.5), quantile(total, 0.99)
	b.ReportMetric(p50.Seconds(), mode+"-p50-s")
	b.ReportMetric(p99.Seconds(), mode+"-p99-s")
	fmt.Printf("%s: n=%d kubectl create -> first answer p50 %v p99 %v (max %v); API has the pod -> first answer p50 %v p99 %v\n", mode, len(all),
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), quantile(total, 1).Round(time.Millisecond),
		quant(all, 0.5, func(p podTimes) time.Duration { return p.conn.Sub(p.created) }).Round(time.Millisecond),
		quant(all, 0.99, func(p podTimes) time.Duration { return p.conn.Sub(p.created) }).Round(time.Millisecond))
	fmt.Printf("  medians: %s\n", describeParts(func(f func(podTimes) time.Duration) time.Duration { return med(f) }))
	slowest := slices.MaxFunc(all, func(a, b podTimes) int { return cmp.Compare(a.conn.Sub(a.start), b.conn.Sub(b.start)) })
	fmt.Printf("  slowest pod (%v): %s\n", slowest.conn.Sub(slowest.start).Round(time.Millisecond),
		describeParts(func(f func(podTimes) time.Duration) time.Duration { return f(slowest).Round(time.Millisecond) }))
	fmt.Printf("  felix programmed the policy (status file) after the CNI ADD's end: median %v, p99 %v; before the pod's kernel answered: median %v\n",
		med(func(p podTimes) time.Duration { return p.policy.Sub(p.cni.done) }),
		quant(all, 0.99, func(p podTimes) time.Duration { return p.policy.Sub(p.cni.done) }).Round(time.Millisecond),
		med(func(p podTimes) time.Duration { return p.reachable.Sub(p.policy) }))
}

// podParts names where a pod's time goes, in order.
var podParts = []struct {
	name string
	of   func(podTimes) time.Duration
}{
	{"kubectl until the API has the pod", func(p podTimes) time.Duration { return p.created.Sub(p.start) }},
	{"scheduler", func(p podTimes) time.Duration { return p.scheduled.Sub(p.created) }},
	{"kubelet to RunPodSandbox", func(p podTimes) time.Duration { return p.sandbox.start.Sub(p.scheduled) }},
	{"sandbox before CNI", func(p podTimes) time.Duration { return p.cni.start.Sub(p.sandbox.start) }},
	{"CNI ADD", func(p podTimes) time.Duration { return p.cni.done.Sub(p.cni.start) }},
	{"sandbox after CNI", func(p podTimes) time.Duration { return p.sandbox.done.Sub(p.cni.done) }},
	{"container create+start", func(p podTimes) time.Duration { return p.sandbox.containerStart.Sub(p.sandbox.done) }},
	{"kubelet status (IP seen)", func(p podTimes) time.Duration { return p.running.Sub(p.sandbox.containerStart) }},
	{"to the pod's kernel answering", func(p podTimes) time.Duration { return p.reachable.Sub(p.running) }},
	{"to the first answer", func(p podTimes) time.Duration { return p.conn.Sub(p.reachable) }},
}

// describeParts renders each part's duration as value gives it.
func describeParts(value func(func(podTimes) time.Duration) time.Duration) string {
	var out []string
	for _, part := range podParts {
		out = append(out, fmt.Sprintf("%s %v", part.name, value(part.of)))
	}
	return strings.Join(out, " | ")
}

// quant is the q-quantile of f over all.
func quant(all []podTimes, q float64, f func(podTimes) time.Duration) time.Duration {
	var ds []time.Duration
	for _, p := range all {
		ds = append(ds, f(p))
	}
	return quantile(ds, q)
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
