package dstest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// nextEvent waits for one event.
func nextEvent(t *testing.T, w datastore.Watcher) datastore.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	return datastore.Event{}
}

func describe(ev datastore.Event) string {
	if ev.Type == datastore.EventError {
		return fmt.Sprintf("Error(%v)", ev.Err)
	}
	if ev.Type == datastore.EventUndecodable {
		if ev.Bad == nil {
			return "Undecodable(nil)"
		}
		return fmt.Sprintf("Undecodable %s", ev.Bad.Key.Name)
	}
	return fmt.Sprintf("%s %s", ev.Type, ev.Object.GetName())
}

func testWatch(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	before := mustR(t)(c.Create(ctx, pool("w-before", "10.10.0.0/16")))
	l := mustL(t)(c.List(ctx, v3.KindIPPool, datastore.ListOptions{}))

	// Changes made before the watch starts, after the list revision, must
	// still be seen: the watch is from the revision, not from "now".
	p := mustR(t)(c.Create(ctx, pool("w1", "10.11.0.0/16"))).(*v3.IPPool)
	w := mustW(t)(c.Watch(ctx, v3.KindIPPool, datastore.WatchOptions{Revision: l.Revision}))
	defer w.Stop()

	p.Spec.Disabled = true
	p2 := mustR(t)(c.Update(ctx, p)).(*v3.IPPool)
	mustR(t)(c.Delete(ctx, datastore.KeyOf(p2), datastore.DeleteOptions{}))
	mustR(t)(c.Delete(ctx, datastore.KeyOf(before), datastore.DeleteOptions{}))

	want := []string{"Added w1", "Modified w1", "Deleted w1", "Deleted w-before"}
	for i, wantEv := range want {
		ev := nextEvent(t, w)
		if got := describe(ev); got != wantEv {
			t.Fatalf("event %d: got %s, want %s", i, got, wantEv)
		}
		if ev.Revision == "" {
			t.Fatalf("event %d has no revision", i)
		}
		if ev.Type == datastore.EventModified && !ev.Object.(*v3.IPPool).Spec.Disabled {
			t.Fatal("Modified event does not carry the new state")
		}
		if ev.Type == datastore.EventDeleted && ev.Object.GetName() == "w1" && !ev.Object.(*v3.IPPool).Spec.Disabled {
			t.Fatal("Deleted event does not carry the last state")
		}
	}

	// A watch restricted to a namespace sees only that namespace.
	l2 := mustL(t)(c.List(ctx, v3.KindNetworkSet, datastore.ListOptions{}))
	wns := mustW(t)(c.Watch(ctx, v3.KindNetworkSet, datastore.WatchOptions{Namespace: "watched", Revision: l2.Revision}))
	defer wns.Stop()
	mustR(t)(c.Create(ctx, netset("other", "n1", nil, "10.0.0.0/24")))
	mustR(t)(c.Create(ctx, netset("watched", "n2", nil, "10.0.0.0/24")))
	if got := describe(nextEvent(t, wns)); got != "Added n2" {
		t.Fatalf("namespaced watch: got %s, want Added n2", got)
	}
}

func testWatchGone(t *testing.T, h Harness) {
	c := h.New(t)
	ctx := ctxT(t)
	l := mustL(t)(c.List(ctx, v3.KindIPPool, datastore.ListOptions{}))
	for i := 0; i < 3; i++ {
		p := mustR(t)(c.Create(ctx, pool(fmt.Sprintf("gone-%d", i), fmt.Sprintf("10.%d.0.0/16", 20+i))))
		mustR(t)(c.Delete(ctx, datastore.KeyOf(p), datastore.DeleteOptions{}))
	}
	h.ForceRevisionGone(t, c, l.Revision)
	w, err := c.Watch(ctx, v3.KindIPPool, datastore.WatchOptions{Revision: l.Revision})
	if err != nil {
		if !errors.Is(err, datastore.ErrRevisionGone) {
			t.Fatalf("watch from a compacted revision: %v, want ErrRevisionGone", err)
		}
		return
	}
	defer w.Stop()
	for {
		ev := nextEvent(t, w)
		if ev.Type == datastore.EventError {
			if !errors.Is(ev.Err, datastore.ErrRevisionGone) {
				t.Fatalf("watch error %v, want ErrRevisionGone", ev.Err)
			}
			return
		}
		// Some backends replay what they still have before failing; that
		// is fine as long as the failure is reported.
	}
}
