package dstest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustR, mustL and mustW fail the test on error and return the value:
// mustR(t)(c.Get(ctx, k)).
func mustR(t *testing.T) func(v3.Resource, error) v3.Resource {
	return func(r v3.Resource, err error) v3.Resource {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func mustL(t *testing.T) func(*datastore.List, error) *datastore.List {
	return func(l *datastore.List, err error) *datastore.List {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func mustW(t *testing.T) func(datastore.Watcher, error) datastore.Watcher {
	return func(w datastore.Watcher, err error) datastore.Watcher {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func testCreateGet(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	in := pool("pool-a", "10.1.0.0/16")
	created := mustR(t)(c.Create(ctx, in))
	createdTS := created.GetCreationTimestamp()
	if created.GetResourceVersion() == "" || created.GetUID() == "" || createdTS.IsZero() {
		t.Fatalf("created object lacks resourceVersion/uid/creationTimestamp: %+v", created)
	}
	if in.ResourceVersion != "" || in.Spec.BlockSize != 0 {
		t.Fatal("Create modified the caller's object")
	}
	got := mustR(t)(c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "pool-a"})).(*v3.IPPool)
	if got.Spec.CIDR != "10.1.0.0/16" || got.Spec.BlockSize != 26 || got.Spec.IPIPMode != "Never" {
		t.Fatalf("stored pool not defaulted as Calico does: %+v", got.Spec)
	}
	if got.ResourceVersion != created.GetResourceVersion() || got.UID != created.GetUID() {
		t.Fatalf("get returned version %s uid %s, create returned %s %s", got.ResourceVersion, got.UID, created.GetResourceVersion(), created.GetUID())
	}
	_, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "nope"})
	wantErr(t, err, datastore.ErrNotFound)

	ns := mustR(t)(c.Create(ctx, netset("ns1", "set-a", nil, "10.9.0.0/24")))
	got2 := mustR(t)(c.Get(ctx, datastore.KeyOf(ns))).(*v3.NetworkSet)
	if got2.Namespace != "ns1" || len(got2.Spec.Nets) != 1 {
		t.Fatalf("namespaced get: %+v", got2)
	}
	_, err = c.Get(ctx, datastore.Key{Kind: v3.KindNetworkSet, Namespace: "other", Name: "set-a"})
	wantErr(t, err, datastore.ErrNotFound)
}

func testCreateExisting(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	mustR(t)(c.Create(ctx, pool("dup", "10.2.0.0/16")))
	_, err := c.Create(ctx, pool("dup", "10.3.0.0/16"))
	wantErr(t, err, datastore.ErrAlreadyExists)
	got := mustR(t)(c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "dup"})).(*v3.IPPool)
	if got.Spec.CIDR != "10.2.0.0/16" {
		t.Fatalf("failed create overwrote the pool: %s", got.Spec.CIDR)
	}
}

func testInvalidWrite(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	bad := pool("bad", "10.4.0.0/16")
	bad.Spec.BlockSize = 33
	_, err := c.Create(ctx, bad)
	wantErr(t, err, datastore.ErrInvalid)
	if !strings.Contains(err.Error(), "spec.blockSize: 33 is outside 20-32") {
		t.Fatalf("validation error does not name the field: %v", err)
	}
	_, err = c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "bad"})
	wantErr(t, err, datastore.ErrNotFound)

	good := mustR(t)(c.Create(ctx, pool("good", "10.5.0.0/16"))).(*v3.IPPool)
	good.Spec.BlockSize = 99
	_, err = c.Update(ctx, good)
	wantErr(t, err, datastore.ErrInvalid)
	got := mustR(t)(c.Get(ctx, datastore.KeyOf(good))).(*v3.IPPool)
	if got.Spec.BlockSize != 26 {
		t.Fatalf("invalid update was stored: blockSize %d", got.Spec.BlockSize)
	}
}

func testUpdateCAS(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	v1 := mustR(t)(c.Create(ctx, pool("cas", "10.6.0.0/16"))).(*v3.IPPool)

	a := v1.DeepCopy()
	a.Spec.NATOutgoing = true
	v2 := mustR(t)(c.Update(ctx, a))
	if v2.GetResourceVersion() == v1.ResourceVersion {
		t.Fatal("update did not change the resource version")
	}
	if v2.GetUID() != v1.UID {
		t.Fatal("update changed the UID")
	}

	stale := v1.DeepCopy()
	stale.Spec.Disabled = true
	_, err := c.Update(ctx, stale)
	wantErr(t, err, datastore.ErrConflict)
	var op *datastore.OpError
	if !errors.As(err, &op) || op.Op != "update" || op.Key.Name != "cas" {
		t.Fatalf("conflict error does not say what failed: %v", err)
	}
	got := mustR(t)(c.Get(ctx, datastore.KeyOf(v1))).(*v3.IPPool)
	if got.Spec.Disabled || !got.Spec.NATOutgoing {
		t.Fatalf("stale update changed the pool: %+v", got.Spec)
	}

	noVersion := got.DeepCopy()
	noVersion.ResourceVersion = ""
	_, err = c.Update(ctx, noVersion)
	wantErr(t, err, datastore.ErrInvalid)

	missing := pool("never-created", "10.7.0.0/16")
	missing.ResourceVersion = got.ResourceVersion
	_, err = c.Update(ctx, missing)
	if !errors.Is(err, datastore.ErrNotFound) && !errors.Is(err, datastore.ErrConflict) {
		t.Fatalf("update of a missing object: %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	key := datastore.Key{Kind: v3.KindIPPool, Name: "del"}
	_, err := c.Delete(ctx, key, datastore.DeleteOptions{})
	wantErr(t, err, datastore.ErrNotFound)

	v1 := mustR(t)(c.Create(ctx, pool("del", "10.8.0.0/16"))).(*v3.IPPool)
	upd := v1.DeepCopy()
	upd.Spec.Disabled = true
	v2 := mustR(t)(c.Update(ctx, upd))

	_, err = c.Delete(ctx, key, datastore.DeleteOptions{ResourceVersion: v1.ResourceVersion})
	wantErr(t, err, datastore.ErrConflict)
	_, err = c.Delete(ctx, key, datastore.DeleteOptions{UID: "not-the-uid"})
	wantErr(t, err, datastore.ErrConflict)
	mustR(t)(c.Get(ctx, key))

	last := mustR(t)(c.Delete(ctx, key, datastore.DeleteOptions{ResourceVersion: v2.GetResourceVersion(), UID: string(v2.GetUID())})).(*v3.IPPool)
	if !last.Spec.Disabled {
		t.Fatalf("delete did not return the last state: %+v", last.Spec)
	}
	_, err = c.Get(ctx, key)
	wantErr(t, err, datastore.ErrNotFound)
	_, err = c.Delete(ctx, key, datastore.DeleteOptions{})
	wantErr(t, err, datastore.ErrNotFound)
}

func testList(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	mustR(t)(c.Create(ctx, netset("ns-b", "web", map[string]string{"app": "web", "tier": "front"}, "10.0.1.0/24")))
	mustR(t)(c.Create(ctx, netset("ns-a", "db", map[string]string{"app": "db"}, "10.0.2.0/24")))
	mustR(t)(c.Create(ctx, netset("ns-a", "web", map[string]string{"app": "web"}, "10.0.3.0/24")))
	mustR(t)(c.Create(ctx, netset("ns-a-x", "api", nil, "10.0.4.0/24")))

	names := func(l *datastore.List) string {
		var out []string
		for _, it := range l.Items {
			out = append(out, it.GetNamespace()+"/"+it.GetName())
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		name string
		opts datastore.ListOptions
		want string
	}{
		{"all", datastore.ListOptions{}, "ns-a/db,ns-a/web,ns-a-x/api,ns-b/web"},
		{"namespace", datastore.ListOptions{Namespace: "ns-a"}, "ns-a/db,ns-a/web"},
		{"selector", datastore.ListOptions{Selector: "app == 'web'"}, "ns-a/web,ns-b/web"},
		{"namespace and selector", datastore.ListOptions{Namespace: "ns-b", Selector: "has(tier)"}, "ns-b/web"},
		{"absent label", datastore.ListOptions{Selector: "app != 'web'"}, "ns-a/db,ns-a-x/api"},
		{"no match", datastore.ListOptions{Namespace: "ns-zzz"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := mustL(t)(c.List(ctx, v3.KindNetworkSet, tc.opts))
			if got := names(l); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if l.Revision == "" {
				t.Fatal("list has no revision")
			}
		})
	}
	_, err := c.List(ctx, v3.KindNetworkSet, datastore.ListOptions{Selector: "app =="})
	wantErr(t, err, datastore.ErrInvalid)
}

func isNotFound(err error) bool { return errors.Is(err, datastore.ErrNotFound) }
