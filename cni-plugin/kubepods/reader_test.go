package kubepods

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
)

// TestIPAMAnnotations: the namespace's pool lists apply unless the pod
// sets its own, as in Calico's plugin; ipAddrs comes from the pod only.
func TestIPAMAnnotations(t *testing.T) {
	const v4, v6, addrs = "cni.projectcalico.org/ipv4pools", "cni.projectcalico.org/ipv6pools", "cni.projectcalico.org/ipAddrs"
	for _, tc := range []struct {
		name    string
		ns, pod map[string]string
		want    map[string]string
	}{
		{"namespace pools", map[string]string{v4: `["a"]`, v6: `["b"]`}, nil, map[string]string{v4: `["a"]`, v6: `["b"]`}},
		{"the pod's pools win", map[string]string{v4: `["a"]`, v6: `["b"]`}, map[string]string{v4: `["p"]`}, map[string]string{v4: `["p"]`, v6: `["b"]`}},
		{"an empty pod value does not", map[string]string{v4: `["a"]`}, map[string]string{v4: ""}, map[string]string{v4: `["a"]`}},
		{"ipAddrs from the pod only", map[string]string{addrs: `["10.0.0.1"]`}, map[string]string{addrs: `["10.0.0.2"]`}, map[string]string{addrs: `["10.0.0.2"]`}},
		{"nothing", nil, nil, map[string]string{}},
	} {
		if got := ipamAnnotations(tc.ns, tc.pod); !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestIPAMInputs: a pod and its namespace give IPAM the merged pool
// annotations and the namespace's labels, never nil (a namespace without
// labels has none: not the same as labels unknown).
func TestIPAMInputs(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "v",
		Labels:      map[string]string{"ns": "v"},
		Annotations: map[string]string{"cni.projectcalico.org/ipv4pools": `["pool3"]`, "cni.projectcalico.org/ipv6pools": `["pool6"]`}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "v",
		Annotations: map[string]string{"cni.projectcalico.org/ipv6pools": `["mine"]`}}}
	info, err := ipamInputs(ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Request.IPv4Pools, []string{"pool3"}) || !slices.Equal(info.Request.IPv6Pools, []string{"mine"}) {
		t.Errorf("pools v4 %v v6 %v, want the namespace's v4 and the pod's v6", info.Request.IPv4Pools, info.Request.IPv6Pools)
	}
	if !maps.Equal(info.NamespaceLabels, map[string]string{"ns": "v"}) {
		t.Errorf("namespace labels %v", info.NamespaceLabels)
	}
	info, err = ipamInputs(&corev1.Namespace{}, pod)
	if err != nil || info.NamespaceLabels == nil {
		t.Errorf("namespace without labels: labels %#v, err %v", info.NamespaceLabels, err)
	}
	// A namespace annotation that is not a JSON list fails the ADD, as
	// Calico's plugin fails it.
	ns.Annotations["cni.projectcalico.org/ipv4pools"] = "pool3"
	if _, err := ipamInputs(ns, pod); err == nil {
		t.Error("a malformed namespace ipv4pools annotation was accepted")
	}
}

// TestKubeErr: the API server refusing the plugin is access denied (CNI
// 105, naming what to fix), not an internal error; a transport failure
// is the datastore being unavailable (11); other API answers pass as is.
func TestKubeErr(t *testing.T) {
	gr := schema.GroupResource{Resource: "namespaces"}
	if err := kubeErr(apierrors.NewForbidden(gr, "v", errors.New("RBAC"))); !errors.Is(err, datastore.ErrAccessDenied) || !strings.Contains(err.Error(), "ClusterRole") {
		t.Errorf("forbidden: %v", err)
	}
	if err := kubeErr(apierrors.NewUnauthorized("expired")); !errors.Is(err, datastore.ErrAccessDenied) {
		t.Errorf("unauthorized: %v", err)
	}
	if err := kubeErr(errors.New("connection refused")); !errors.Is(err, datastore.ErrUnavailable) {
		t.Errorf("transport: %v", err)
	}
	if err := kubeErr(apierrors.NewNotFound(gr, "v")); errors.Is(err, datastore.ErrUnavailable) || errors.Is(err, datastore.ErrAccessDenied) || !apierrors.IsNotFound(err) {
		t.Errorf("not found: %v", err)
	}
}

// TestReleaseOfPodDeletedMeanwhile: a DEL whose pod is deleted between
// Release's read and its patch (a forced delete, grace 0) succeeds, so
// the plugin goes on to release the addresses. It failed with "pods not
// found", and the address stayed allocated with no pod (found by
// lab/cluster's chaos run: 1 of ~1,000 churned pods).
func TestReleaseOfPodDeletedMeanwhile(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: map[string]string{
			annotationPodIP: "10.0.0.5/32", annotationPodIPs: "10.0.0.5/32", annotationContainerID: "abc"}}}
	var patchStatus atomic.Int32
	patchStatus.Store(http.StatusNotFound)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/ns/pods/web":
			json.NewEncoder(w).Encode(pod)
		case r.Method == http.MethodPatch && r.URL.Path == "/api/v1/namespaces/ns/pods/web/status":
			writeStatus(w, int(patchStatus.Load()))
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	p := &pods{store{fakeCore(t, srv)}}
	if err := p.Release(context.Background(), "ns", "web", "abc"); err != nil {
		t.Fatalf("Release of a pod deleted after its read: %v", err)
	}
	// Any other failure of the patch still fails the DEL (it is retried).
	patchStatus.Store(http.StatusInternalServerError)
	if err := p.Release(context.Background(), "ns", "web", "abc"); err == nil {
		t.Fatal("Release with a failing patch succeeded")
	}
}

// TestPodNotYetInWatchCache: a pod the API server's watch cache has not
// seen yet (resourceVersion 0 answers 404) is read again consistently;
// only a pod missing from both fails the ADD.
func TestPodNotYetInWatchCache(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	nsObj := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	var exists atomic.Bool
	var cachedReads, consistentReads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/ns":
			json.NewEncoder(w).Encode(nsObj)
		case "/api/v1/namespaces/ns/pods/web":
			cached := r.URL.Query().Get("resourceVersion") == "0"
			if cached {
				cachedReads.Add(1)
			} else {
				consistentReads.Add(1)
			}
			if cached || !exists.Load() {
				writeStatus(w, http.StatusNotFound)
				return
			}
			json.NewEncoder(w).Encode(pod)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	core := fakeCore(t, srv)
	exists.Store(true)
	got, _, err := getPodAndNamespace(context.Background(), store{core}, "ns", "web")
	if err != nil || got.Name != "web" || cachedReads.Load() != 1 || consistentReads.Load() != 1 {
		t.Fatalf("pod behind the watch cache: %v, %v (cached reads %d, consistent %d)", got, err, cachedReads.Load(), consistentReads.Load())
	}
	exists.Store(false)
	if _, _, err := getPodAndNamespace(context.Background(), store{core}, "ns", "web"); !apierrors.IsNotFound(err) {
		t.Fatalf("a pod that is gone: %v, want not found", err)
	}
}

// writeStatus answers an API request with code, as the API server does.
func writeStatus(w http.ResponseWriter, code int) {
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(http.StatusText(code))})
}

// fakeCore is a core-group REST client of srv, closed with the test.
func fakeCore(t *testing.T, srv *httptest.Server) rest.Interface {
	t.Helper()
	t.Cleanup(srv.Close)
	core, err := kdd.NewCore(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return core
}
