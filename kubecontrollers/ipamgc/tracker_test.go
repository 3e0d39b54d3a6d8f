package ipamgc

import (
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	g := 10 * time.Second
	tr := NewTracker()
	tr.Observe(t0, []string{"a", "b"})
	if tr.Confirmed("a", t0.Add(9*time.Second), g) {
		t.Fatal("confirmed before the grace period")
	}
	tr.Observe(t0.Add(5*time.Second), []string{"a", "c"}) // b gone: forgotten
	if !tr.Confirmed("a", t0.Add(10*time.Second), g) {
		t.Fatal("a not confirmed after the grace period")
	}
	if tr.Confirmed("c", t0.Add(10*time.Second), g) {
		t.Fatal("c counted from before it was seen")
	}
	tr.Observe(t0.Add(6*time.Second), []string{"a", "b"})
	if tr.Confirmed("b", t0.Add(12*time.Second), g) {
		t.Fatal("b, missing from one pass, kept its old start")
	}
	if tr.Confirmed("a", t0.Add(time.Hour), 0) {
		t.Fatal("grace 0 must disable collection")
	}
	tr.Forget("a")
	if tr.Len() != 1 {
		t.Fatalf("len %d", tr.Len())
	}
}
