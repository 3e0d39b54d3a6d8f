package confd

import (
	"context"
	"errors"
	"fmt"
	"github.com/tabbynet/tabby/internal/testlog"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/datastore"
)

// fakeSecrets is a SecretGetter over a map; err, when set, fails reads.
type fakeSecrets struct {
	mu    sync.Mutex
	data  map[string]map[string][]byte
	err   error
	reads int
}

func (f *fakeSecrets) GetSecret(_ context.Context, name string) (map[string][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	d, ok := f.data[name]
	if !ok {
		return nil, fmt.Errorf("%w: secret %s not found in namespace kube-system", ErrSecretUnavailable, name)
	}
	return d, nil
}

func (f *fakeSecrets) set(name, key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := map[string][]byte{key: []byte(value)} // a new map: readers hold the old one
	for k, v := range f.data[name] {
		if k != key {
			d[k] = v
		}
	}
	f.data[name] = d
}

func pw(name, key string) *v3.BGPPassword {
	return &v3.BGPPassword{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}}
}

func TestSecretRefs(t *testing.T) {
	p1 := peerRes("a", "10.0.0.254", 65000)
	p1.Spec.Password = pw("s2", "k")
	p2 := peerRes("b", "10.0.0.253", 65000)
	p2.Spec.Password = pw("s1", "k")
	p3 := peerRes("c", "10.0.0.252", 65000)
	p3.Spec.Password = pw("s1", "k")
	cfg := &v3.BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v3.BGPConfigurationSpec{NodeMeshPassword: pw("s1", "mesh")}}
	got := secretRefs([]v3.Resource{p1, p2, p3, cfg, nodeRes("node1", "10.0.0.1/24"), peerRes("nopw", "10.0.0.9", 1)})
	want := []render.SecretRef{{Name: "s1", Key: "k"}, {Name: "s1", Key: "mesh"}, {Name: "s2", Key: "k"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatal(d)
	}
}

func TestResolveSecrets(t *testing.T) {
	refs := []render.SecretRef{{Name: "s1", Key: "a"}, {Name: "s1", Key: "b"}, {Name: "s1", Key: "nokey"}, {Name: "gone", Key: "a"}}
	fs := &fakeSecrets{data: map[string]map[string][]byte{"s1": {"a": []byte("pa"), "b": []byte("pb")}}}
	got, reasons, err := resolveSecrets(context.Background(), fs, refs)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[render.SecretRef]string{{Name: "s1", Key: "a"}: "pa", {Name: "s1", Key: "b"}: "pb"}, got); d != "" {
		t.Error(d)
	}
	wantReasons := []string{"secret s1 has no key nokey", "secret unavailable: secret gone not found in namespace kube-system"}
	if d := cmp.Diff(wantReasons, reasons); d != "" {
		t.Error(d)
	}
	if fs.reads != 2 {
		t.Errorf("%d reads, want one per Secret (2)", fs.reads)
	}

	// A transient failure is an error (retried), not a missing key.
	fs.err = errors.New("connection refused")
	if _, _, err := resolveSecrets(context.Background(), fs, refs); err == nil || errors.Is(err, ErrSecretUnavailable) {
		t.Errorf("transient error: got %v", err)
	}
	// No getter (etcd mode): unavailable, saying why.
	_, reasons, err = resolveSecrets(context.Background(), NoSecrets{Datastore: "etcdv3"}, refs[:1])
	if err != nil || len(reasons) != 1 || !strings.Contains(reasons[0], "etcdv3 datastore cannot provide") {
		t.Errorf("etcd mode: reasons %q, err %v", reasons, err)
	}
}

func TestSecretNamespace(t *testing.T) {
	for env, want := range map[string]string{"": "kube-system", "calico-system": "calico-system"} {
		if got := SecretNamespace(func(string) string { return env }); got != want {
			t.Errorf("NAMESPACE=%q: got %q, want %q", env, got, want)
		}
	}
}

// TestDaemonPasswordFromSecret: the password reaches the config; a wrong
// key keeps the running config and is logged once, without the password;
// fixing or rotating the Secret takes effect at the next resync although
// no datastore event says so.
func TestDaemonPasswordFromSecret(t *testing.T) {
	fs := &fakeSecrets{data: map[string]map[string][]byte{"bgp": {"tor": []byte("s3cret-one")}}}
	var logs testlog.Buffer
	fa := &fakeApplier{applied: make(chan string, 100)}
	d := NewDaemon(Config{NodeName: "node1", Debounce: 5 * time.Millisecond, SecretResync: 30 * time.Millisecond,
		Secrets: fs, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, fa)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	tor := peerRes("tor", "10.0.0.254", 65000)
	tor.Spec.Password = pw("bgp", "tor")
	d.OnUpdates([]datastore.Update{upd(nodeRes("node1", "10.0.0.1/24")), upd(tor)})
	d.OnStatusUpdated(datastore.StatusInSync)
	if got := wait(t, fa); !strings.Contains(got, `password "s3cret-one";`) {
		t.Fatalf("password missing from config:\n%s", got)
	}

	// Wrong key: no apply (BIRD keeps the running config), reported once.
	wrong := tor.DeepCopy()
	wrong.Spec.Password = pw("bgp", "nope")
	d.OnUpdates([]datastore.Update{upd(wrong)})
	time.Sleep(200 * time.Millisecond) // several resyncs
	out := logs.String()
	if n := strings.Count(out, "cannot render BIRD config"); n != 1 {
		t.Errorf("error logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "secret bgp key nope is not available") || !strings.Contains(out, "secret bgp has no key nope") {
		t.Errorf("log does not say what is missing:\n%s", out)
	}
	fa.mu.Lock()
	applies := len(fa.texts)
	fa.mu.Unlock()
	if applies != 1 {
		t.Errorf("%d applies, want 1 (the running config must be kept)", applies)
	}

	// The key appears in the Secret: taken up by a resync, no event needed.
	fs.set("bgp", "nope", "s3cret-two")
	if got := wait(t, fa); !strings.Contains(got, `password "s3cret-two";`) {
		t.Fatalf("fixed Secret not taken up:\n%s", got)
	}
	// Rotation.
	fs.set("bgp", "nope", "s3cret-three")
	if got := wait(t, fa); !strings.Contains(got, `password "s3cret-three";`) {
		t.Fatalf("rotated Secret not taken up:\n%s", got)
	}
	if out := logs.String(); strings.Contains(out, "s3cret") {
		t.Errorf("a password reached the log:\n%s", out)
	}
}

// TestDaemonSecretReadRetried: a transient read failure is retried with
// backoff, not reported as bad input.
func TestDaemonSecretReadRetried(t *testing.T) {
	fs := &fakeSecrets{data: map[string]map[string][]byte{"bgp": {"tor": []byte("pw")}}, err: errors.New("apiserver down")}
	fa := &fakeApplier{applied: make(chan string, 100)}
	d := NewDaemon(Config{NodeName: "node1", Debounce: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond,
		Secrets: fs, Logger: slog.New(slog.DiscardHandler)}, fa)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tor := peerRes("tor", "10.0.0.254", 65000)
	tor.Spec.Password = pw("bgp", "tor")
	d.OnUpdates([]datastore.Update{upd(nodeRes("node1", "10.0.0.1/24")), upd(tor)})
	d.OnStatusUpdated(datastore.StatusInSync)
	none(t, fa, 150*time.Millisecond)
	fs.mu.Lock()
	fs.err = nil
	fs.mu.Unlock()
	if got := wait(t, fa); !strings.Contains(got, `password "pw";`) {
		t.Fatalf("config after recovery:\n%s", got)
	}
}
