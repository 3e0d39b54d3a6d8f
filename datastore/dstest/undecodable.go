package dstest

import (
	"errors"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func poolKey(name string) datastore.Key { return datastore.Key{Kind: v3.KindIPPool, Name: name} }

// testUndecodableCRUD: a record that cannot be decoded does not fail the
// list of its kind (the good ones are listed, the bad one reported with
// its key); Get says it is undecodable; Delete removes it.
func testUndecodableCRUD(t *testing.T, h Harness) {
	c := h.New(t)
	ctx := ctxT(t)
	mustR(t)(c.Create(ctx, pool("u1", "10.60.0.0/16")))
	mustR(t)(c.Create(ctx, pool("u3", "10.62.0.0/16")))
	h.PutUndecodable(t, poolKey("u2"))

	l, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{})
	if err != nil {
		t.Fatalf("one undecodable record failed the whole list: %v", err)
	}
	if got := names(l.Items); got != "u1,u3" {
		t.Errorf("listed %q, want u1,u3", got)
	}
	if len(l.Bad) != 1 || l.Bad[0].Key != poolKey("u2") || !errors.Is(l.Bad[0], datastore.ErrUndecodable) ||
		l.Bad[0].StorageKey == "" || l.Bad[0].Revision == "" {
		t.Fatalf("bad records %+v, want one for %s", l.Bad, poolKey("u2"))
	}
	if err := l.Complete(); !errors.Is(err, datastore.ErrUndecodable) || !strings.Contains(err.Error(), l.Bad[0].StorageKey) {
		t.Errorf("Complete() = %v, want ErrUndecodable naming %s", err, l.Bad[0].StorageKey)
	}
	sel := mustL(t)(c.List(ctx, v3.KindIPPool, datastore.ListOptions{Selector: "nothing == 'here'"}))
	if len(sel.Items) != 0 || len(sel.Bad) != 1 {
		t.Errorf("selector list: %d items, %d bad; want 0 and 1 (bad records whatever the selector)", len(sel.Items), len(sel.Bad))
	}

	res, err := datastore.ReadMany(ctx, c, []datastore.ReadRequest{
		{Key: datastore.Key{Kind: v3.KindIPPool}, List: true},
		{Key: poolKey("u2")},
		{Key: poolKey("u1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || names(res[0].List.Items) != "u1,u3" || len(res[0].List.Bad) != 1 {
		t.Errorf("ReadMany list: %v %+v", res[0].Err, res[0].List)
	}
	if !errors.Is(res[1].Err, datastore.ErrUndecodable) || res[2].Err != nil {
		t.Errorf("ReadMany gets: bad %v, good %v", res[1].Err, res[2].Err)
	}

	_, err = c.Get(ctx, poolKey("u2"))
	var bad datastore.BadRecord
	if !errors.Is(err, datastore.ErrUndecodable) || !errors.As(err, &bad) || bad.Revision != l.Bad[0].Revision {
		t.Fatalf("get of the undecodable record: %v, want ErrUndecodable at revision %s", err, l.Bad[0].Revision)
	}
	gone, err := c.Delete(ctx, poolKey("u2"), datastore.DeleteOptions{ResourceVersion: bad.Revision})
	if err != nil {
		t.Fatalf("deleting the undecodable record: %v", err)
	}
	if datastore.KeyOf(gone) != poolKey("u2") {
		t.Errorf("delete returned %v", datastore.KeyOf(gone))
	}
	if _, err := c.Get(ctx, poolKey("u2")); !isNotFound(err) {
		t.Errorf("after delete: %v, want not found", err)
	}
	if l := mustL(t)(c.List(ctx, v3.KindIPPool, datastore.ListOptions{})); len(l.Bad) != 0 || names(l.Items) != "u1,u3" {
		t.Errorf("after delete: items %s, bad %+v", names(l.Items), l.Bad)
	}
}

// testUndecodableWatch: a record written in a form that cannot be decoded
// comes as an EventUndecodable and the watch goes on.
func testUndecodableWatch(t *testing.T, h Harness) {
	c := h.New(t)
	ctx := ctxT(t)
	l := mustL(t)(c.List(ctx, v3.KindIPPool, datastore.ListOptions{}))
	w := mustW(t)(c.Watch(ctx, v3.KindIPPool, datastore.WatchOptions{Revision: l.Revision}))
	defer w.Stop()
	h.PutUndecodable(t, poolKey("wb1"))
	mustR(t)(c.Create(ctx, pool("wb2", "10.63.0.0/16")))
	for i, want := range []string{"Undecodable wb1", "Added wb2"} {
		ev := nextEvent(t, w)
		if got := describe(ev); got != want {
			t.Fatalf("event %d: got %s, want %s", i, got, want)
		}
		if ev.Type == datastore.EventUndecodable && (!errors.Is(*ev.Bad, datastore.ErrUndecodable) || ev.Bad.StorageKey == "") {
			t.Errorf("undecodable event %+v", ev.Bad)
		}
	}
}

// testUndecodableSyncer: a syncer skips undecodable records (present from
// the start or written later) and keeps the rest flowing; a good record
// turning bad is removed from the view; a fixed one appears; each bad
// record and revision is counted once.
func testUndecodableSyncer(t *testing.T, h Harness) {
	c := h.New(t)
	ctx := ctxT(t)
	count := func() float64 { return float64(datastore.UndecodableRecords(v3.KindIPPool)) }
	before := count()
	mustR(t)(c.Create(ctx, pool("a", "10.70.0.0/16")))
	mustR(t)(c.Create(ctx, pool("b", "10.71.0.0/16")))
	h.PutUndecodable(t, poolKey("x"))

	rec := startSyncer(t, c, v3.KindIPPool)
	rec.waitFor(t, "in sync", rec.inSync)
	rec.waitFor(t, "a,b", func() bool { return rec.viewNames(v3.KindIPPool) == "a,b" })

	h.PutUndecodable(t, poolKey("y"))
	h.PutUndecodable(t, poolKey("a"))
	rec.waitFor(t, "a gone when it turned bad", func() bool { return rec.viewNames(v3.KindIPPool) == "b" })
	mustR(t)(c.Create(ctx, pool("c", "10.72.0.0/16")))
	rec.waitFor(t, "c after the bad records", func() bool { return rec.viewNames(v3.KindIPPool) == "b,c" })

	// Fixed: deleted and written again.
	mustR(t)(c.Delete(ctx, poolKey("x"), datastore.DeleteOptions{}))
	mustR(t)(c.Create(ctx, pool("x", "10.73.0.0/16")))
	rec.waitFor(t, "x once fixed", func() bool { return rec.viewNames(v3.KindIPPool) == "b,c,x" })
	if got := count() - before; got != 3 {
		t.Errorf("counted %v undecodable records, want 3 (x, y, a: each once)", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.inSync() {
		t.Errorf("syncer not in sync: %v", rec.statuses)
	}
}

func names(items []v3.Resource) string {
	var out []string
	for _, it := range items {
		out = append(out, it.GetName())
	}
	return strings.Join(out, ",")
}
