//go:build integration

package kdd

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// recorder keeps what a syncer delivered.
type recorder struct {
	mu     sync.Mutex
	inSync bool
	log    []string
	view   map[datastore.Key]v3.Resource
}

func (r *recorder) OnStatusUpdated(s datastore.SyncStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inSync = s == datastore.StatusInSync
}

func (r *recorder) OnUpdates(ups []datastore.Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range ups {
		r.log = append(r.log, fmt.Sprintf("%s %s", u.Type, u.Key))
		if u.Type == datastore.EventDeleted {
			delete(r.view, u.Key)
		} else {
			r.view[u.Key] = u.Object
		}
	}
}

func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("timed out waiting for %s; log:\n%s", what, strings.Join(r.log, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// keys lists the view's keys of a kind, sorted.
func (r *recorder) keys(kind string) string {
	var out []string
	for k := range r.view {
		if k.Kind == kind {
			out = append(out, k.Namespace+"/"+k.Name)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func runSyncer(t *testing.T, s datastore.Syncer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("syncer did not stop")
		}
	})
}

// TestInformerSyncerNativeKinds: the informer syncer's snapshot of the
// derived kinds equals what the client lists, and pod changes come out
// as endpoints appearing and going.
func TestInformerSyncerNativeKinds(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := ctxT(t)
	must[*corev1.Namespace](t)(s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}))
	must[*corev1.ServiceAccount](t)(s.kube.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}))
	pods := s.kube.CoreV1().Pods("team-a")
	must[*corev1.Pod](t)(pods.Create(ctx, pod("web-1", "node-1", map[string]string{annotationPodIP: "10.0.0.5"}), metav1.CreateOptions{}))
	noIP := must[*corev1.Pod](t)(pods.Create(ctx, pod("web-2", "node-1", nil), metav1.CreateOptions{}))
	must[*corev1.Node](t)(s.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1",
		Annotations: map[string]string{nodeIPv4Address: "192.168.1.10/24"}}}, metav1.CreateOptions{}))

	kinds := []string{v3.KindWorkloadEndpoint, v3.KindProfile, v3.KindNode, v3.KindNetworkPolicy}
	rec := &recorder{view: map[datastore.Key]v3.Resource{}}
	runSyncer(t, NewSyncer(c, kinds, rec))
	rec.waitFor(t, "in sync", func() bool { return rec.inSync })

	rec.mu.Lock()
	for _, kind := range kinds {
		l := must[*datastore.List](t)(c.List(ctx, kind, datastore.ListOptions{}))
		want := map[datastore.Key]string{}
		for _, it := range l.Items {
			want[datastore.KeyOf(it)] = it.GetResourceVersion()
		}
		got := map[datastore.Key]string{}
		for k, obj := range rec.view {
			if k.Kind == kind {
				got[k] = obj.GetResourceVersion()
			}
		}
		if d := diffKeys(want, got); d != "" {
			t.Errorf("%s: syncer snapshot differs from the list:\n%s", kind, d)
		}
	}
	if rec.keys(v3.KindWorkloadEndpoint) != "team-a/node--1-k8s-web--1-eth0" {
		t.Errorf("endpoints: %s", rec.keys(v3.KindWorkloadEndpoint))
	}
	rec.mu.Unlock()

	noIP.Annotations = map[string]string{annotationPodIP: "10.0.0.6"}
	must[*corev1.Pod](t)(pods.Update(ctx, noIP, metav1.UpdateOptions{}))
	rec.waitFor(t, "web-2's endpoint", func() bool {
		return rec.keys(v3.KindWorkloadEndpoint) == "team-a/node--1-k8s-web--1-eth0,team-a/node--1-k8s-web--2-eth0"
	})
	p := must[*corev1.Pod](t)(pods.Get(ctx, "web-1", metav1.GetOptions{}))
	p.Status.Phase = corev1.PodFailed
	must[*corev1.Pod](t)(pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}))
	rec.waitFor(t, "web-1's endpoint gone", func() bool {
		return rec.keys(v3.KindWorkloadEndpoint) == "team-a/node--1-k8s-web--2-eth0"
	})
}

func diffKeys(want, got map[datastore.Key]string) string {
	var out []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			out = append(out, "missing "+k.String())
		} else if g != v {
			out = append(out, fmt.Sprintf("%s at version %s, want %s", k, g, v))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "extra "+k.String())
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// TestSyncerRelistAfterOutage forces each syncer to relist: while the
// API server is down its etcd moves on and is compacted, so the watches
// cannot resume from where they were (410 Gone). After the restart only
// the real changes may be delivered: no spurious delete, no re-add.
func TestSyncerRelistAfterOutage(t *testing.T) {
	s := startServer(t)
	syncers := map[string]func(c *Client, cb datastore.SyncerCallbacks) datastore.Syncer{
		"WatchSyncer": func(c *Client, cb datastore.SyncerCallbacks) datastore.Syncer {
			return datastore.NewWatchSyncer(c, []string{v3.KindIPPool}, cb, datastore.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond})
		},
		"InformerSyncer": func(c *Client, cb datastore.SyncerCallbacks) datastore.Syncer {
			return NewSyncer(c, []string{v3.KindIPPool}, cb)
		},
	}
	for _, name := range []string{"WatchSyncer", "InformerSyncer"} {
		t.Run(name, func(t *testing.T) {
			s.empty(t)
			c := s.client(t)
			ctx := ctxT(t)
			for _, p := range []string{"keep", "change", "remove"} {
				must[v3.Resource](t)(c.Create(ctx, &v3.IPPool{
					TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
					ObjectMeta: metav1.ObjectMeta{Name: p},
					Spec:       v3.IPPoolSpec{CIDR: map[string]string{"keep": "10.1.0.0/16", "change": "10.2.0.0/16", "remove": "10.3.0.0/16"}[p]},
				}))
			}
			rec := &recorder{view: map[datastore.Key]v3.Resource{}}
			runSyncer(t, syncers[name](c, rec))
			rec.waitFor(t, "in sync", func() bool { return rec.inSync && rec.keys(v3.KindIPPool) == "/change,/keep,/remove" })
			rec.mu.Lock()
			snapshot := len(rec.log)
			rec.mu.Unlock()

			s.Stop()
			bumpAndCompact(t, s.Etcd.Endpoint())
			s.Start()
			chg := must[v3.Resource](t)(c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "change"})).(*v3.IPPool)
			chg.Spec.Disabled = true
			must[v3.Resource](t)(c.Update(ctx, chg))
			must[v3.Resource](t)(c.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "remove"}, datastore.DeleteOptions{}))

			rec.waitFor(t, "the changes", func() bool {
				p, ok := rec.view[datastore.Key{Kind: v3.KindIPPool, Name: "change"}]
				return rec.keys(v3.KindIPPool) == "/change,/keep" && ok && p.(*v3.IPPool).Spec.Disabled
			})
			rec.mu.Lock()
			defer rec.mu.Unlock()
			got := append([]string(nil), rec.log[snapshot:]...)
			sort.Strings(got)
			if want := "Deleted IPPool(remove); Modified IPPool(change)"; strings.Join(got, "; ") != want {
				t.Errorf("after the outage the syncer delivered\n %s\nwant (in any order)\n %s", strings.Join(got, "; "), want)
			}
		})
	}
}

// bumpAndCompact moves etcd's revision on (with a key outside the API
// server's prefix) and compacts up to it.
func bumpAndCompact(t *testing.T, endpoint string) {
	t.Helper()
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rev int64
	for i := 0; i < 3; i++ {
		resp, err := ec.Put(ctx, "/tabby-test/bump", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	if _, err := ec.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}

// TestInformerSyncerBackSoonAfterOutage: after the API server was away
// 30 s, the informer syncer follows it again within seconds of its
// return, as Calico's syncer (it relists every second). The client-go
// reflectors' own backoff (0.8 s doubling to 30 s, up to 100% jitter)
// left it blind for up to a minute: felix then programmed no policy for
// the pods started meanwhile (found by lab/cluster's chaos run, the
// datastore fault: 51 s).
func TestInformerSyncerBackSoonAfterOutage(t *testing.T) {
	s := startServer(t)
	s.empty(t)
	c := s.client(t)
	ctx := ctxT(t)
	must[*corev1.Namespace](t)(s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}))
	rec := &recorder{view: map[datastore.Key]v3.Resource{}}
	runSyncer(t, NewSyncer(c, []string{v3.KindIPPool, v3.KindWorkloadEndpoint}, rec))
	rec.waitFor(t, "in sync", func() bool { return rec.inSync })
	s.Stop()
	time.Sleep(30 * time.Second)
	s.Start()
	back := time.Now()
	must[*corev1.Pod](t)(s.kube.CoreV1().Pods("team-a").Create(ctx, pod("web-1", "node-1", map[string]string{annotationPodIP: "10.0.0.5"}), metav1.CreateOptions{}))
	rec.waitFor(t, "the endpoint of the pod created after the outage", func() bool {
		return rec.keys(v3.KindWorkloadEndpoint) == "team-a/node--1-k8s-web--1-eth0"
	})
	if took := time.Since(back); took > 5*time.Second {
		t.Errorf("the syncer delivered the first change %.1f s after the API server was back; want within 5 s", took.Seconds())
	} else {
		t.Logf("first change delivered %.1f s after the API server was back", took.Seconds())
	}
}
