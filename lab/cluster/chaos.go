package cluster

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Chaos (issue 32): faults on the running cluster under churn, with an
// observer checking throughout, each fault's figures and one line per
// invariant at the end. The faults hit the last node (the victim, alone
// on its subnet with the default layout); the stream runs between pods
// on the first two; the default-deny namespace's guard pod lives on the
// victim, probed from the second node and probing the first.

// Faults, in the order a run applies them.
const (
	FaultAgentKill   = "agent-kill"   // calico-node's process SIGKILLed in its container
	FaultAgentDelete = "agent-delete" // calico-node's pod deleted with kubectl
	FaultPowerLoss   = "power-loss"   // the node's power lost and restored
	FaultDatastore   = "datastore"    // etcd and kube-apiserver stopped, restarted
	FaultRoll        = "roll"         // the DaemonSet rolled to a new tag and back
	FaultNodeReplace = "node-replace" // the node drained, deleted, re-added
)

// AllFaults is every fault, in order.
func AllFaults() []string {
	return []string{FaultAgentKill, FaultAgentDelete, FaultPowerLoss, FaultDatastore, FaultRoll, FaultNodeReplace}
}

// ChaosOptions size a run.
type ChaosOptions struct {
	// Pods is the churn's pod creations in all (each deleted again),
	// spread over the faults.
	Pods int
	// Outage is how long the datastore stays down; PowerOff how long
	// the node stays without power.
	Outage, PowerOff time.Duration
	Faults           []string
	Seed             int64
	Out              io.Writer
}

func (o *ChaosOptions) defaults() {
	if o.Pods <= 0 {
		o.Pods = 1000
	}
	if o.Outage <= 0 {
		o.Outage = 30 * time.Second
	}
	if o.PowerOff <= 0 {
		o.PowerOff = 15 * time.Second
	}
	if len(o.Faults) == 0 {
		o.Faults = AllFaults()
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// chaosRun is one run's state.
type chaosRun struct {
	c        *Cluster
	o        ChaosOptions
	kc       kubernetes.Interface
	obs      *observer
	churn    *churner
	victim   int // index in c.State.Nodes
	stream   [2]*corev1.Pod
	logf     func(format string, args ...any)
	settleTo time.Duration
}

// Chaos runs the faults in turn under churn and returns the summary;
// an error means the run could not be carried out (the invariants are
// in the summary either way as far as it got).
func (c *Cluster) Chaos(ctx context.Context, o ChaosOptions) (ChaosSummary, error) {
	o.defaults()
	start := time.Now()
	if len(c.State.Nodes) < 3 {
		return ChaosSummary{}, fmt.Errorf("chaos needs 3 nodes or more (has %d)", len(c.State.Nodes))
	}
	kc, err := c.Client()
	if err != nil {
		return ChaosSummary{}, err
	}
	r := &chaosRun{c: c, o: o, kc: kc, victim: len(c.State.Nodes) - 1, settleTo: 4 * time.Minute,
		logf: func(f string, a ...any) {
			fmt.Fprintf(o.Out, "%s "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
		}}
	r.obs = newObserver(c, kc, c.State.Nodes[r.victim].Name)
	r.churn = &churner{kc: kc, obs: r.obs, rnd: rand.New(rand.NewSource(o.Seed))}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	sum := ChaosSummary{Target: o.Pods}
	if err := r.setup(runCtx); err != nil {
		return sum, fmt.Errorf("setup: %w", err)
	}
	go r.churn.run(runCtx)
	for i, f := range o.Faults {
		quota := o.Pods / len(o.Faults)
		if i == len(o.Faults)-1 {
			quota = o.Pods - quota*(len(o.Faults)-1)
		}
		res := r.phase(runCtx, f, quota)
		sum.Faults = append(sum.Faults, res)
		fmt.Fprintln(o.Out, res.Line())
	}
	r.obs.setPhase("final")
	final, settle, err := r.final(runCtx)
	sum.FinalLeaks = final
	fmt.Fprintf(o.Out, "final (churn scaled to 0): %d leaks after GC (clean %.1f s after settling)\n", len(final), settle.Seconds())
	r.obs.mu.Lock()
	sum.Created, sum.Deleted = len(r.obs.created), len(r.obs.deleted)
	sum.Overlaps, _ = r.obs.dups.Overlaps(time.Now())
	sum.PodsSeen = len(r.obs.dups.pods)
	sum.StreamRequests, sum.StreamBroken, sum.StreamSpan = r.obs.stream.requests, r.obs.stream.broken, time.Since(r.obs.stream.start)
	sum.Probes, sum.Forbidden, sum.ForbiddenFirst = r.obs.probes, r.obs.forbidden, r.obs.firstBad
	r.obs.mu.Unlock()
	sum.Elapsed = time.Since(start)
	// The run's namespaces go, so that the next run finds none.
	if _, derr := c.Kubectl(ctx, "delete", "namespace", chaosOpen, chaosDeny, chaosChurn, "--wait=false"); derr != nil {
		r.logf("%v", derr)
	}
	return sum, err
}

// setup creates the namespaces, the stream's pods, the default-deny
// namespace with its guard and the churn's Deployments (at 0), waits
// until the deny policy holds, and starts the observer.
func (r *chaosRun) setup(ctx context.Context) error {
	for _, ns := range []string{chaosOpen, chaosDeny, chaosChurn} {
		if _, err := r.c.Kubectl(ctx, "create", "namespace", ns); err != nil {
			return err
		}
	}
	nodes := r.c.State.Nodes
	deps := []*appsv1.Deployment{deployment(chaosDeny, "guard", nodes[r.victim].Name, 1, "netexec", "--http-port=8080", "--udp-port=-1")}
	for _, d := range churnDeployments() {
		deps = append(deps, deployment(chaosChurn, d, "", 0, "pause"))
	}
	for _, d := range deps {
		if _, err := r.kc.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i, name := range []string{"stream-server", "stream-client"} {
		p := agnPod(chaosOpen, name, nodes[i].Name, nil)
		if _, err := r.kc.CoreV1().Pods(chaosOpen).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for i, name := range []string{"stream-server", "stream-client"} {
		p, err := waitRunning(ctx, r.kc, chaosOpen, name, 2*time.Minute)
		if err != nil {
			return err
		}
		r.stream[i] = p
	}
	if err := r.obs.start(ctx); err != nil {
		return err
	}
	// The probes must see a connection when one is possible: both ways
	// through before the policy, neither after.
	if err := r.waitGuard(ctx, true); err != nil {
		return err
	}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: chaosDeny, Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}}
	if _, err := r.kc.NetworkingV1().NetworkPolicies(chaosDeny).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := r.waitGuard(ctx, false); err != nil {
		return err
	}
	go r.obs.watchAddresses(ctx)
	if err := r.obs.runStream(ctx, r.stream[1], r.stream[0]); err != nil {
		return err
	}
	if err := r.obs.runProbes(ctx, r.stream[1], r.stream[0]); err != nil {
		return err
	}
	r.logf("setup done: stream %s -> %s, guard on %s", nodes[1].Name, nodes[0].Name, nodes[r.victim].Name)
	return nil
}

// waitGuard waits for the guard to run and to be reachable (open) or
// not (the deny policy holds) both ways: from the stream's client into
// it and from it to the stream's server, with the probes' own code.
func (r *chaosRun) waitGuard(ctx context.Context, open bool) error {
	var in, out bool
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		g := r.obs.guard()
		if g == nil {
			continue
		}
		in, out = r.obs.reach(ctx, r.stream[1], g), r.obs.reach(ctx, g, r.stream[0])
		if in == open && out == open {
			return nil
		}
	}
	return fmt.Errorf("the guard pod: want reachable=%v both ways, got in %v, out %v after 2 m", open, in, out)
}

// phase runs one fault under churn: the churn starts on the phase's
// quota, the fault is injected once half of it is created, then the
// churn finishes its quota and stops, the cluster settles and the leak
// check runs.
func (r *chaosRun) phase(ctx context.Context, fault string, quota int) FaultResult {
	r.obs.setPhase(fault)
	before := r.obs.counts()
	res := FaultResult{Fault: fault}
	r.churn.setGoal(before.created + quota)
	r.waitCreated(ctx, before.created+quota/2, 3*time.Minute)
	r.logf("%s: injecting (%d pods created so far)", fault, r.obs.counts().created)
	ready, detail, err := r.inject(ctx, fault)
	res.Ready, res.Detail = ready, detail
	if err != nil {
		res.ReadyErr = err.Error()
	}
	r.logf("%s: ready again in %.1f s %s %v", fault, ready.Seconds(), detail, err)
	r.waitCreated(ctx, before.created+quota, 5*time.Minute)
	r.churn.setGoal(0)
	res.Leaks, res.Settle = r.settleAndCheck(ctx)
	after := r.obs.counts()
	res.Created, res.Deleted = after.created-before.created, after.deleted-before.deleted
	res.Probes, res.Forbidden = after.probes-before.probes, after.forbidden-before.forbidden
	res.Overlaps, res.Dups = after.overlaps-before.overlaps, after.dups-before.dups
	r.obs.mu.Lock()
	res.StreamBroken = r.obs.stream.broken
	r.obs.mu.Unlock()
	return res
}

// waitCreated waits until the churn created n pods in all.
func (r *chaosRun) waitCreated(ctx context.Context, n int, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(250 * time.Millisecond) {
		if r.obs.counts().created >= n {
			return
		}
	}
	r.logf("churn: %d of %d pods created after %s", r.obs.counts().created, n, timeout)
}

// settleAndCheck waits until the cluster and the run's Deployments are
// ready with nothing being deleted, then checks for leaks until none is
// left (kube-controllers' GC, felix's resync) or a minute passed.
func (r *chaosRun) settleAndCheck(ctx context.Context) ([]string, time.Duration) {
	if err := r.settle(ctx); err != nil {
		return []string{"not settled: " + err.Error()}, 0
	}
	start := time.Now()
	var leaks []string
	for {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := r.c.Leaks(lctx, r.kc)
		cancel()
		if err != nil {
			l = []string{"leak check failed: " + err.Error()}
		}
		if len(l) > 0 && leaks == nil {
			r.logf("leaks seen once settled (waiting up to a minute for them to go): %s", strings.Join(l, "; "))
		}
		leaks = l
		if len(leaks) == 0 || time.Since(start) > time.Minute || ctx.Err() != nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if len(leaks) > 0 {
		r.logf("leaks: %s", strings.Join(leaks, "; "))
	}
	return leaks, time.Since(start)
}

// settle waits until the cluster is ready, the guard's Deployment has
// its pod ready and no pod of the run is being deleted or set up. The
// churn's Deployments may lack pods: after the datastore fault
// kube-controller-manager's ReplicaSet controller, its per-item retry
// backoff grown during the outage, recreated churn-a's pods only 5 min
// later; the leak check compares the kernel and IPAM with the pods that
// exist.
func (r *chaosRun) settle(ctx context.Context) error {
	deadline := time.Now().Add(r.settleTo)
	last := ""
	for ; time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		if last = r.c.readiness(ctx, r.kc); last != "" {
			continue
		}
		if last = r.deploymentsReady(ctx); last != "" {
			continue
		}
		busy := r.obs.pods(func(p *corev1.Pod) bool {
			return strings.HasPrefix(p.Namespace, "chaos-") && (p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning)
		})
		if last = fmt.Sprintf("%d pods being set up or deleted", len(busy)); len(busy) == 0 {
			return nil
		}
	}
	return fmt.Errorf("after %s: %s", r.settleTo, last)
}

// deploymentsReady is "" when the guard's Deployment is rolled out.
func (r *chaosRun) deploymentsReady(ctx context.Context) string {
	d, err := r.kc.AppsV1().Deployments(chaosDeny).Get(ctx, "guard", metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if s := d.Status; s.ObservedGeneration < d.Generation || s.ReadyReplicas != *d.Spec.Replicas || s.Replicas != *d.Spec.Replicas {
		return fmt.Sprintf("the guard: %d of %d ready", s.ReadyReplicas, *d.Spec.Replicas)
	}
	return ""
}

// final scales the churn to nothing, settles and checks for leaks once
// more.
func (r *chaosRun) final(ctx context.Context) ([]string, time.Duration, error) {
	for _, d := range churnDeployments() {
		var err error
		for i := 0; i < 10; i++ {
			if err = r.churn.scale(ctx, d, 0); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	// The ReplicaSets delete the pods a moment after the scale: wait for
	// them to be gone, or settle would see them running and the summary
	// would count their deletions as missing.
	if err := r.waitChurnGone(ctx); err != nil {
		return nil, 0, err
	}
	leaks, settle := r.settleAndCheck(ctx)
	return leaks, settle, nil
}

// waitChurnGone waits until no pod of the churn's namespace is left.
func (r *chaosRun) waitChurnGone(ctx context.Context) error {
	deadline := time.Now().Add(r.settleTo)
	for ; time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		if left := r.obs.pods(func(p *corev1.Pod) bool { return p.Namespace == chaosChurn }); len(left) == 0 {
			return nil
		}
	}
	return fmt.Errorf("the churn's pods not gone %s after scaling to 0", r.settleTo)
}
