//go:build integration

package kdd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dstest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// testServer is a real kube-apiserver with Tabby's CRDs applied.
type testServer struct {
	*testservers.KubeAPIServer
	rest *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

// startServer starts etcd and kube-apiserver v1.37.2 and applies every CRD
// in manifests/crds, failing the test with the CRD's name if the server
// rejects one or never establishes it. The watch cache is off so that a
// watch from a compacted revision gets 410 Gone, and the namespace
// lifecycle admission plugin too, so that the shared suite may use
// namespaces it never creates (the etcd backend has no namespaces). Open
// watches are cut within a second of a stop, which otherwise waits for
// them (and the outage tests stop the server).
func startServer(t testing.TB) *testServer {
	t.Helper()
	k := testservers.StartKubeAPIServer(t, testservers.WithAPIServerFlags(
		"--watch-cache=false",
		"--disable-admission-plugins=NamespaceLifecycle",
		"--shutdown-watch-termination-grace-period=1s",
	))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1
	s := &testServer{KubeAPIServer: k, rest: rc}
	s.kube = kubernetes.NewForConfigOrDie(rc)
	s.dyn = dynamic.NewForConfigOrDie(rc)
	testservers.ApplyCRDs(t, rc, "../../manifests/crds")
	return s
}

// client returns a new datastore client for the server.
func (s *testServer) client(t testing.TB) *Client {
	t.Helper()
	c, err := New(Config{REST: s.rest, RequestTimeout: 5 * time.Second, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// empty deletes every custom resource of every kind.
func (s *testServer) empty(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, info := range v3.Kinds() {
		if DerivedKind(info.Kind) {
			continue
		}
		ri := s.dyn.Resource(crdGVR(info))
		list, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("emptying %s: %v", info.Plural, err)
		}
		for _, it := range list.Items {
			err := ri.Namespace(it.GetNamespace()).Delete(ctx, it.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("emptying %s: %v", info.Plural, err)
			}
		}
	}
}

// compact compacts the API server's etcd at its current revision, so
// that every older revision is gone.
func (s *testServer) compact(t testing.TB) {
	t.Helper()
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Etcd.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := ec.Get(ctx, "/compact-marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ec.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compacting: %v", err)
	}
}

func (s *testServer) harness() dstest.Harness {
	return dstest.Harness{
		New: func(t *testing.T) datastore.Client {
			s.empty(t)
			return s.client(t)
		},
		ForceRevisionGone: func(t *testing.T, _ datastore.Client, _ string) { s.compact(t) },
		StopServer:        func(*testing.T) { s.Stop() },
		StartServer:       func(*testing.T) { s.Start() },
		PutUndecodable:    s.putUndecodable,
	}
}

// putUndecodable writes, through the dynamic client as kubectl would, a
// custom resource at k whose Calico metadata annotation has a field of the
// wrong type: the API server accepts it (an annotation is a string), and
// it violates Tabby's Go types.
func (s *testServer) putUndecodable(t *testing.T, k datastore.Key) {
	t.Helper()
	info, ok := v3.LookupKind(k.Kind)
	if !ok {
		t.Fatalf("unknown kind %s", k.Kind)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v3.CRDGroupVersion,
		"kind":       crdKind(k.Kind),
		"metadata": map[string]any{
			"name":        k.Name,
			"annotations": map[string]any{metadataAnnotation: `{"labels":123}`},
		},
		"spec": map[string]any{},
	}}
	if k.Namespace != "" {
		u.SetNamespace(k.Namespace)
	}
	if k.Kind == v3.KindIPPool {
		u.Object["spec"] = map[string]any{"cidr": "10.99.0.0/24"}
	}
	s.writeCR(t, info, u)
}

// writeCR creates u, or replaces the object of its name.
func (s *testServer) writeCR(t *testing.T, info v3.KindInfo, u *unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ri := s.dyn.Resource(crdGVR(info)).Namespace(u.GetNamespace())
	cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = ri.Create(ctx, u, metav1.CreateOptions{})
	case err == nil:
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("writing %s %s: %v", info.Kind, u.GetName(), err)
	}
}

// TestSuite runs the shared datastore suite against a real kube-apiserver,
// once with the generic watch syncer over this client and once with the
// informer syncer.
func TestSuite(t *testing.T) {
	s := startServer(t)
	t.Run("WatchSyncer", func(t *testing.T) { dstest.Run(t, s.harness()) })
	t.Run("InformerSyncer", func(t *testing.T) {
		defaultSyncer := dstest.NewSyncer
		t.Cleanup(func() { dstest.NewSyncer = defaultSyncer })
		dstest.NewSyncer = func(c datastore.Client, kinds []string, cb datastore.SyncerCallbacks) datastore.Syncer {
			return NewSyncer(c.(*Client), kinds, cb)
		}
		dstest.Run(t, s.harness())
	})
}

// TestUnreachable: a server that is not there yields an error naming it,
// promptly, not a hang.
func TestUnreachable(t *testing.T) {
	c, err := New(Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Get(context.Background(), datastore.Key{Kind: v3.KindIPPool, Name: "x"})
	if !errors.Is(err, datastore.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("error %q does not name the endpoint", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s", d)
	}
	_, err = c.Watch(context.Background(), v3.KindIPPool, datastore.WatchOptions{})
	if !errors.Is(err, datastore.ErrUnavailable) {
		t.Fatalf("watch: got %v, want ErrUnavailable", err)
	}
}

// TestCRDStorage checks what lands in the API server: the CRD group and
// kind, Calico's metadata annotation, policy names as Calico (v3.30 and
// later) names them, no status where Calico's CRD has none, and objects
// read back as projectcalico.org/v3.
func TestCRDStorage(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	pol := &v3.GlobalNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Labels: map[string]string{"owner": "sec"}},
		Spec:       v3.GlobalNetworkPolicySpec{Selector: "all()", Types: []v3.PolicyType{v3.PolicyTypeIngress}},
	}
	created, err := c.Create(ctx, pol)
	if err != nil {
		t.Fatal(err)
	}
	if created.GetObjectKind().GroupVersionKind().GroupVersion().String() != v3.GroupVersion || v3.KindOf(created) != v3.KindGlobalNetworkPolicy {
		t.Fatalf("created object has type %v", created.GetObjectKind().GroupVersionKind())
	}
	info, _ := v3.LookupKind(v3.KindGlobalNetworkPolicy)
	cr, err := s.dyn.Resource(crdGVR(info)).Get(ctx, "deny-all", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("policy not stored as CR deny-all: %v", err)
	}
	if cr.GetAPIVersion() != "crd.projectcalico.org/v1" || cr.GetKind() != "GlobalNetworkPolicy" {
		t.Errorf("CR type %s %s", cr.GetAPIVersion(), cr.GetKind())
	}
	if len(cr.GetLabels()) != 0 || !strings.Contains(cr.GetAnnotations()[metadataAnnotation], `"owner":"sec"`) {
		t.Errorf("labels not kept in %s: labels %v annotations %v", metadataAnnotation, cr.GetLabels(), cr.GetAnnotations())
	}
	if want, _ := ConvertUID(cr.GetUID()); created.GetUID() != want {
		t.Errorf("v3 UID %s, want the CR's converted: %s", created.GetUID(), want)
	}
	l, err := c.List(ctx, v3.KindGlobalNetworkPolicy, datastore.ListOptions{Selector: "owner == 'sec'"})
	if err != nil || len(l.Items) != 1 || l.Items[0].GetName() != "deny-all" {
		t.Fatalf("list by label: %v %v", l, err)
	}

	// A policy an older release stored as "default.<name>" (no name in
	// its annotation) is found, updated and deleted by its v3 name.
	legacy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v3.CRDGroupVersion, "kind": v3.KindGlobalNetworkPolicy,
		"metadata": map[string]any{"name": "default.legacy"},
		"spec":     map[string]any{"tier": "default", "selector": "all()"},
	}}
	s.writeCR(t, info, legacy)
	lk := datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: "legacy"}
	old, err := c.Get(ctx, lk)
	if err != nil {
		t.Fatalf("get of a legacy-named policy: %v", err)
	}
	old.(*v3.GlobalNetworkPolicy).Spec.Selector = "app == 'x'"
	if _, err := c.Update(ctx, old); err != nil {
		t.Fatalf("update of a legacy-named policy: %v", err)
	}
	if cr, err := s.dyn.Resource(crdGVR(info)).Get(ctx, "default.legacy", metav1.GetOptions{}); err != nil || !strings.Contains(fmt.Sprint(cr.Object["spec"]), "app == 'x'") {
		t.Fatalf("legacy CR after update: %v %v", cr, err)
	}
	if _, err := c.Delete(ctx, lk, datastore.DeleteOptions{}); err != nil {
		t.Fatalf("delete of a legacy-named policy: %v", err)
	}
	if _, err := c.Get(ctx, lk); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("legacy policy after delete: %v", err)
	}

	// Calico's IPPool CRD has no status: one sent is not stored (the API
	// server would prune it for Calico too), and the write succeeds.
	pool := &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       v3.IPPoolSpec{CIDR: "10.9.0.0/16"},
	}
	if _, err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	withStatus := got.(*v3.IPPool).DeepCopy()
	withStatus.Status = &v3.IPPoolStatus{Conditions: []metav1.Condition{{
		Type: "Allocatable", Status: metav1.ConditionTrue, Reason: "OK", LastTransitionTime: metav1.Now(),
	}}}
	upd, err := c.Update(ctx, withStatus)
	if err != nil {
		t.Fatal(err)
	}
	got, err = c.Get(ctx, datastore.KeyOf(upd))
	if err != nil {
		t.Fatal(err)
	}
	if st := got.(*v3.IPPool).Status; st != nil || got.GetResourceVersion() != upd.GetResourceVersion() {
		t.Fatalf("status stored in a CRD without one: %+v (rv %s, update returned %s)", st, got.GetResourceVersion(), upd.GetResourceVersion())
	}
}
