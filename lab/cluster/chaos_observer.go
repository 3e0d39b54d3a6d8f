package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// The chaos run's observer: from start to end it watches every pod's
// address (no address shown for two live pods), keeps one TCP stream
// between pods on two nodes the faults do not hit, and probes the
// default-deny namespace every 100 ms, in and out; it also counts the
// churn's pod creations and deletions.

// Namespaces of the chaos run.
const (
	chaosOpen  = "chaos-open"  // the stream's pods, no policy
	chaosDeny  = "chaos-deny"  // default-deny ingress and egress: guard
	chaosChurn = "chaos-churn" // the churn's Deployments
)

// observer is shared by the run's goroutines; its counters are under mu.
type observer struct {
	c        *Cluster
	informer cache.SharedIndexInformer
	victim   string // the node the node-level faults hit (the guard's)

	mu        sync.Mutex
	phase     string
	dups      *dupTracker
	created   map[types.UID]bool
	deleted   map[types.UID]bool
	probes    int
	forbidden int
	firstBad  string
	stream    streamState
}

type streamState struct {
	requests int
	start    time.Time
	broken   string
}

func newObserver(c *Cluster, kc kubernetes.Interface, victim string) *observer {
	f := informers.NewSharedInformerFactory(kc, 0)
	o := &observer{c: c, informer: f.Core().V1().Pods().Informer(), victim: victim, phase: "setup",
		dups: newDupTracker(), created: map[types.UID]bool{}, deleted: map[types.UID]bool{}}
	_, _ = o.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Namespace == chaosChurn {
				o.mu.Lock()
				o.created[p.UID] = true
				o.mu.Unlock()
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && p.Namespace == chaosChurn {
				o.mu.Lock()
				o.deleted[p.UID] = true
				o.mu.Unlock()
			}
		},
	})
	return o
}

// start runs the informer and waits for its first list.
func (o *observer) start(ctx context.Context) error {
	go o.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), o.informer.HasSynced) {
		return fmt.Errorf("the pod watch did not sync")
	}
	return nil
}

func (o *observer) setPhase(p string) {
	o.mu.Lock()
	o.phase = p
	o.mu.Unlock()
}

// counts is a snapshot of the counters, for a phase's differences.
type counts struct{ created, deleted, probes, forbidden, overlaps, dups int }

func (o *observer) counts() counts {
	o.mu.Lock()
	defer o.mu.Unlock()
	all, dups := o.dups.Overlaps(time.Now())
	return counts{created: len(o.created), deleted: len(o.deleted), probes: o.probes, forbidden: o.forbidden, overlaps: len(all), dups: dups}
}

// pods lists the informer's pods matching keep.
func (o *observer) pods(keep func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, obj := range o.informer.GetStore().List() {
		if p, ok := obj.(*corev1.Pod); ok && keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// live: running on the pod network with an address, not being deleted.
func live(p *corev1.Pod) bool {
	return !p.Spec.HostNetwork && p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
}

// watchAddresses checks the live pods' addresses every 200 ms.
func (o *observer) watchAddresses(ctx context.Context) {
	every(ctx, 200*time.Millisecond, func() bool {
		var addrs []podAddr
		for _, p := range o.pods(live) {
			addrs = append(addrs, podAddr{Pod: p.Namespace + "/" + p.Name, IP: p.Status.PodIP})
		}
		o.mu.Lock()
		o.dups.Update(time.Now(), o.phase, addrs)
		o.mu.Unlock()
		return true
	})
}

// every calls f every d until ctx ends or f returns false.
func every(ctx context.Context, d time.Duration, f func() bool) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !f() {
			return
		}
	}
}

// runStream sends one request every 100 ms on one TCP connection from
// client's namespace to server's port 8080; the first failure breaks the
// stream for good (it is reported, not retried).
func (o *observer) runStream(ctx context.Context, client, server *corev1.Pod) error {
	netns, err := o.c.PodNetns(client)
	if err != nil {
		return err
	}
	conn, err := Dial(ctx, netns, net.JoinHostPort(server.Status.PodIP, "8080"), 3*time.Second)
	netns.Close()
	if err != nil {
		return fmt.Errorf("the stream's connection: %w", err)
	}
	o.mu.Lock()
	o.stream.start = time.Now()
	o.mu.Unlock()
	go func() {
		defer conn.Close()
		every(ctx, 100*time.Millisecond, func() bool {
			o.mu.Lock()
			msg := fmt.Sprint(o.stream.requests)
			o.mu.Unlock()
			got, err := httpGet(conn, "/echo?msg="+msg, 3*time.Second)
			o.mu.Lock()
			defer o.mu.Unlock()
			if err != nil || got != msg {
				o.stream.broken = fmt.Sprintf("request %s during %s at %s: %q, %v", msg, o.phase, time.Now().Format("15:04:05.0"), got, err)
				return false
			}
			o.stream.requests++
			return true
		})
	}()
	return nil
}

// runProbes probes, every 100 ms, into the guard pod (from client, a pod
// on another node) and out of it (to server): default-deny both ways, so
// a connection that completes is a forbidden one.
func (o *observer) runProbes(ctx context.Context, client, server *corev1.Pod) error {
	cns, err := o.c.PodNetns(client)
	if err != nil {
		return err
	}
	go func() {
		defer cns.Close()
		var wg sync.WaitGroup
		defer wg.Wait()
		every(ctx, 100*time.Millisecond, func() bool {
			if guard := o.guard(); guard != nil {
				wg.Add(2)
				go func() { defer wg.Done(); o.probeIn(ctx, cns, guard) }()
				go func() { defer wg.Done(); o.probeOut(ctx, guard, server) }()
			}
			return true
		})
	}()
	return nil
}

// guard is the running guard pod, if any.
func (o *observer) guard() *corev1.Pod {
	g := o.pods(func(p *corev1.Pod) bool { return p.Namespace == chaosDeny && live(p) })
	if len(g) == 0 {
		return nil
	}
	return g[0]
}

// probeIn connects from client's namespace to the guard: it must never
// complete. One that completes but is answered by another pod's name
// reached the address's next holder (the guard's was released), not the
// guard: not counted.
func (o *observer) probeIn(ctx context.Context, cns ns.NetNS, guard *corev1.Pod) {
	conn, err := Dial(ctx, cns, net.JoinHostPort(guard.Status.PodIP, "8080"), time.Second)
	if err != nil {
		o.count("")
		return
	}
	defer conn.Close()
	name, err := httpGet(conn, "/hostname", time.Second)
	if err == nil && name != guard.Name {
		return
	}
	o.count(fmt.Sprintf("into %s (%s) from %s: connected, answer %q %v", guard.Name, guard.Status.PodIP, guard.Spec.NodeName, name, err))
}

// probeOut connects from the guard's namespace to server: it must never
// complete.
func (o *observer) probeOut(ctx context.Context, guard, server *corev1.Pod) {
	gns, err := o.c.PodNetns(guard)
	if err != nil {
		return // its node is off, or the pod is being replaced
	}
	defer gns.Close()
	conn, err := Dial(ctx, gns, net.JoinHostPort(server.Status.PodIP, "8080"), time.Second)
	if err != nil {
		o.count("")
		return
	}
	conn.Close()
	o.count(fmt.Sprintf("out of %s (%s) to %s: connected", guard.Name, guard.Status.PodIP, server.Name))
}

// reach: a TCP connection from from's namespace to to's port 8080
// completes within a second.
func (o *observer) reach(ctx context.Context, from, to *corev1.Pod) bool {
	netns, err := o.c.PodNetns(from)
	if err != nil {
		return false
	}
	defer netns.Close()
	conn, err := Dial(ctx, netns, net.JoinHostPort(to.Status.PodIP, "8080"), time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// count records one probe; bad describes a forbidden connection.
func (o *observer) count(bad string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.probes++
	if bad == "" {
		return
	}
	o.forbidden++
	if o.firstBad == "" {
		o.firstBad = fmt.Sprintf("%s during %s at %s", bad, o.phase, time.Now().Format("15:04:05.0"))
	}
}
