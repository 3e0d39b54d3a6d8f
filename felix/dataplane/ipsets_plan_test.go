package dataplane

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tabbynet/tabby/felix/calc"
)

// TestKernelForm: what the kernel holds for a member: /0 networks as two
// /1s (hash:net refuses /0), single addresses without their length, and
// everything else as it is (an ICMP code 0 is no network).
func TestKernelForm(t *testing.T) {
	for _, tc := range []struct{ typ, m, a, b string }{
		{"hash:net", "0.0.0.0/0", "0.0.0.0/1", "128.0.0.0/1"},
		{"hash:net", "::/0", "::/1", "8000::/1"},
		{"hash:net", "10.0.0.1/32", "10.0.0.1", ""},
		{"hash:net", "fd00::1/128", "fd00::1", ""},
		{"hash:net", "10.0.0.0/8", "10.0.0.0/8", ""},
		{"hash:net", "0.0.0.0/1", "0.0.0.0/1", ""},
		{"hash:ip,port", "10.0.0.1,icmp:8/0", "10.0.0.1,icmp:8/0", ""},
	} {
		if a, b := kernelForm(tc.typ, tc.m); a != tc.a || b != tc.b {
			t.Errorf("kernelForm(%s, %s) = %q, %q; want %q, %q", tc.typ, tc.m, a, b, tc.a, tc.b)
		}
	}
}

func netState(version uint64, members ...string) *setState {
	return &setState{typ: "hash:net", family: "inet", spec: calc.SortedMembers(members), version: version}
}

// TestPlanSets: each way a set is written, planned from the desired and
// kernel states alone.
func TestPlanSets(t *testing.T) {
	written := netState(1, "10.0.0.1/32", "10.0.0.2/32")
	many := make([]string, 40)
	for i := range many {
		many[i] = "10.1.0." + string(rune('0'+i/10)) + string(rune('0'+i%10))
	}
	// Reached from written by the renderer's changes: 0.0.0.0/0 added
	// (its /1s go in), 10.0.0.1 removed; 10.0.0.2 was touched and put
	// back, so nothing is written for it.
	patched := netState(2, "0.0.0.0/0", "10.0.0.2/32")
	patched.viaChanges, patched.since, patched.touched = true, 1, []string{"10.0.0.1/32", "10.0.0.2/32", "0.0.0.0/0"}
	// The /0 goes while 0.0.0.0/1 stays a member on its own: only
	// 128.0.0.0/1 is deleted.
	zeroWritten := netState(3, "0.0.0.0/0", "0.0.0.0/1")
	zeroGone := netState(4, "0.0.0.0/1")
	zeroGone.viaChanges, zeroGone.since, zeroGone.touched = true, 3, []string{"0.0.0.0/0"}
	kernel := func(members ...string) *kernelSet {
		ks := &kernelSet{typ: "hash:net", family: "inet", members: map[string]bool{}}
		for _, m := range members {
			ks.members[m] = true
		}
		return ks
	}
	desired := map[string]*setState{
		"cali40new":   netState(1, "10.0.0.1", "::/0"),
		"cali40same":  written,
		"cali40patch": patched,
		"cali40zero":  zeroGone,
		"cali40small": netState(0, "10.0.0.1/32", "0.0.0.0/0"),
		"cali40big":   netState(0, many...),
		"cali40type":  {typ: "hash:ip,port", family: "inet", spec: calc.Members("10.0.0.1,tcp:80")},
		"cali40skip":  netState(9, "10.9.9.9"),
		"cali40inst":  netState(0, "10.0.0.1/32"),
	}
	actual := map[string]*kernelSet{
		"cali40same":  {typ: "hash:net", family: "inet", from: written},
		"cali40patch": {typ: "hash:net", family: "inet", from: written},
		"cali40zero":  {typ: "hash:net", family: "inet", from: zeroWritten},
		"cali40small": kernel("10.0.0.1", "10.0.0.3"),
		"cali40big":   kernel("10.2.0.1"),
		"cali40type":  kernel("10.0.0.1"),
		"cali40inst":  kernel("10.0.0.1"),
		"cali4t0":     kernel(),
	}
	p := planSets(desired, actual, func(name string, _ *setState) bool { return name == "cali40skip" })
	type op struct {
		Name     string
		Kind     setOpKind
		Del, Add []string
		Temp     string
		Patched  bool
	}
	var got []op
	for _, o := range p.ops {
		got = append(got, op{o.name, o.kind, o.del, o.add, o.temp, o.patched})
	}
	want := []op{
		{Name: "cali40big", Kind: opSwap, Temp: "cali4t0"},
		{Name: "cali40new", Kind: opCreate},
		{Name: "cali40patch", Kind: opPatch, Del: []string{"10.0.0.1"}, Add: []string{"0.0.0.0/1", "128.0.0.0/1"}, Patched: true},
		{Name: "cali40small", Kind: opPatch, Del: []string{"10.0.0.3"}, Add: []string{"0.0.0.0/1", "128.0.0.0/1"}},
		{Name: "cali40type", Kind: opRecreate},
		{Name: "cali40zero", Kind: opPatch, Del: []string{"128.0.0.0/1"}, Patched: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ops (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"cali40inst"}, p.same); d != "" {
		t.Errorf("same (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"cali4t0"}, p.temps); d != "" {
		t.Errorf("temps (-want +got):\n%s", d)
	}
	script := p.script(false)
	for _, line := range []string{
		"destroy cali4t0\n",
		"create cali4t0 hash:net family inet hashsize 1024 maxelem 1048576\n",
		"swap cali4t0 cali40big\ndestroy cali4t0\n",
		"add cali40new ::/1\nadd cali40new 8000::/1\n",
		"del cali40patch 10.0.0.1\nadd cali40patch 0.0.0.0/1\nadd cali40patch 128.0.0.0/1\n",
		"destroy cali40type\ncreate cali40type hash:ip,port family inet",
		"add cali40type 10.0.0.1,6:80\n",
	} {
		if !strings.Contains(script, line) {
			t.Errorf("script lacks %q:\n%s", line, script)
		}
	}
	if strings.Contains(script, "/0") {
		t.Errorf("script holds a /0:\n%s", script)
	}
	if only, _ := p.onlyMembers(); only {
		t.Error("a plan that creates sets is not members-only")
	}
	fills := p.fills()
	if len(fills) != 1 || fills[0].Set != "cali40new" || !cmp.Equal(fills[0].Add, []string{"10.0.0.1", "::/1", "8000::/1"}) {
		t.Errorf("fills = %+v", fills)
	}
	if !strings.Contains(p.script(true), "create cali40new") || strings.Contains(p.script(true), "add cali40new") {
		t.Errorf("a filled plan's script adds the created set's members:\n%s", p.script(true))
	}
}

// TestFailuresBackoff: a failed object is skipped until its retry is due
// (the delay doubling up to the maximum), at once when its desired state
// changes, and forgotten once programmed or no longer desired.
func TestFailuresBackoff(t *testing.T) {
	f := newFailures(time.Second, 4*time.Second)
	now := time.Unix(1000, 0)
	st, other := new(int), new(int)
	if f.skip("a", st, now) {
		t.Fatal("skips an object that never failed")
	}
	for _, wantDelay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if d := f.failed("a", st, nil, now); d != wantDelay {
			t.Fatalf("retry in %v, want %v", d, wantDelay)
		}
		if !f.skip("a", st, now.Add(wantDelay-time.Millisecond)) || f.skip("a", st, now.Add(wantDelay)) {
			t.Fatalf("not skipped exactly until %v", wantDelay)
		}
		if f.skip("a", other, now) {
			t.Fatal("a changed desired state is not retried at once")
		}
	}
	if got := f.nextRetry(); !got.Equal(now.Add(4 * time.Second)) {
		t.Errorf("next retry %v", got)
	}
	if len(f.drain()) != 4 || len(f.drain()) != 0 {
		t.Error("drain does not return each failure once")
	}
	f.keepOnly(func(string) bool { return false })
	if f.has("a") || !f.nextRetry().IsZero() {
		t.Error("a failure of an object no longer desired is kept")
	}
}
