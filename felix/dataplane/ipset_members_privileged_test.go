//go:build privileged

package dataplane_test

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// processCounter is the real runner, remembering the commands it ran; its
// in-process member updates (ExecRunner's IPSetMembers, promoted) run no
// command.
type processCounter struct {
	dataplane.ExecRunner
	mu    sync.Mutex
	calls []string
}

func (p *processCounter) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	p.mu.Lock()
	p.calls = append(p.calls, strings.Join(append([]string{name}, args...), " "))
	p.mu.Unlock()
	return p.ExecRunner.Run(ctx, name, args, stdin)
}

// since returns the commands run after the first n.
func (p *processCounter) since(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls[n:])
}

func (p *processCounter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

var initval = regexp.MustCompile(` initval 0x[0-9a-f]+`)

// ipsetSave is the namespace's `ipset save`, sorted, without the random
// hash seed of each set, so that two namespaces holding the same sets
// print the same.
func ipsetSave(t *testing.T, r dataplane.Runner) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(initval.ReplaceAllString(run(t, r, "ipset", "save"), "")), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// restoredFresh is what `ipset restore` makes of specs in an empty
// namespace (the reference for what the netlink path must leave).
func restoredFresh(t *testing.T, specs []rules.IPSetSpec) string {
	t.Helper()
	r := dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}
	s := dataplane.NewIPSets(r)
	s.SetDesired(specs)
	if _, err := s.ApplyUpdates(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ipsetSave(t, r)
}

// memberSets are one set of every type and family felix renders, in three
// states: 1, 2 (1 with the changes of change12 applied) and 3 (2 with a
// few members added and removed).
func memberSets(state int) []rules.IPSetSpec {
	members := map[int][4][]string{
		1: {
			{"10.1.2.3/32", "10.1.0.0/16", "10.2.2.2/32"},
			{"fd00::1/128", "fd00:1::/64"},
			{"10.1.2.3,tcp:8080", "10.1.2.4,udp:53"},
			{"fd00::1,tcp:80"},
		},
		2: {
			{"10.1.0.0/16", "10.2.2.2/32", "10.3.0.0/24", "10.4.4.4/32"},
			{"fd00:1::/64", "fd00::2/128", "fd00:2::/48"},
			{"10.1.2.3,tcp:8080", "10.1.2.3,udp:8080", "10.1.2.5,sctp:9", "10.1.2.6,udplite:7"},
			{"fd00::2,udp:53", "fd00::3,sctp:1"},
		},
		3: {
			{"10.2.2.2/32", "10.3.0.0/24", "10.4.4.4/32", "10.5.5.5/32", "10.6.0.0/15"},
			{"fd00:1::/64", "fd00:2::/48", "fd00::9/128"},
			{"10.1.2.3,tcp:8080", "10.1.2.5,sctp:9", "10.1.2.6,udplite:7", "10.9.9.9,tcp:1"},
			{"fd00::2,udp:53", "fd00::3,sctp:1", "fd00::4,tcp:65535"},
		},
	}[state]
	return []rules.IPSetSpec{
		{Name: "cali40s:net", Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(slices.Clone(members[0]))},
		{Name: "cali60s:net", Type: calc.HashNet, Family: "inet6", Members: calc.SortedMembers(slices.Clone(members[1]))},
		{Name: "cali40n:port", Type: calc.HashIPPort, Family: "inet", Members: calc.SortedMembers(slices.Clone(members[2]))},
		{Name: "cali60n:port", Type: calc.HashIPPort, Family: "inet6", Members: calc.SortedMembers(slices.Clone(members[3]))},
	}
}

// change12 is the renderer's change from memberSets(1) to memberSets(2).
var change12 = map[string]rules.IPSetChange{
	"cali40s:net":  {Since: 1, Added: []string{"10.3.0.0/24", "10.4.4.4/32"}, Removed: []string{"10.1.2.3/32"}},
	"cali60s:net":  {Since: 1, Added: []string{"fd00::2/128", "fd00:2::/48"}, Removed: []string{"fd00::1/128"}},
	"cali40n:port": {Since: 1, Added: []string{"10.1.2.3,udp:8080", "10.1.2.5,sctp:9", "10.1.2.6,udplite:7"}, Removed: []string{"10.1.2.4,udp:53"}},
	"cali60n:port": {Since: 1, Added: []string{"fd00::2,udp:53", "fd00::3,sctp:1"}, Removed: []string{"fd00::1,tcp:80"}},
}

func versions(v uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, s := range memberSets(1) {
		out[s.Name] = v
	}
	return out
}

// TestPrivilegedIPSetMembersThroughNetlink: member changes of every set
// type and family, as a renderer's patch and as a small difference found
// by a resync, are written without an ipset process and leave the kernel
// exactly as `ipset restore` of the same sets into an empty namespace.
func TestPrivilegedIPSetMembersThroughNetlink(t *testing.T) {
	ctx := context.Background()
	r := &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	s := dataplane.NewIPSets(r)
	s.Update(memberSets(1), versions(1), nil)
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := ipsetSave(t, r.ExecRunner), restoredFresh(t, memberSets(1)); got != want {
		t.Fatalf("initial sets:\n%s\nwant\n%s", got, want)
	}

	// The renderer's patch.
	before := r.count()
	s.Update(memberSets(2), versions(2), change12)
	n, err := s.ApplyUpdates(ctx)
	if err != nil || n != 4 {
		t.Fatalf("patch: %d sets, %v; want 4", n, err)
	}
	if calls := r.since(before); len(calls) != 0 {
		t.Errorf("patch ran %q; want no process", calls)
	}
	if got, want := ipsetSave(t, r.ExecRunner), restoredFresh(t, memberSets(2)); got != want {
		t.Fatalf("after the patch:\n%s\nwant (restore)\n%s", got, want)
	}

	// A resync finding a few members to add and delete: one ipset save
	// to read the kernel, the changes in-process.
	s.InvalidateCache()
	before = r.count()
	s.SetDesired(memberSets(3))
	if n, err := s.ApplyUpdates(ctx); err != nil || n != 4 {
		t.Fatalf("resync: %d sets, %v; want 4", n, err)
	}
	if calls := r.since(before); !slices.Equal(calls, []string{"ipset save"}) {
		t.Errorf("resync ran %q; want only ipset save", calls)
	}
	if got, want := ipsetSave(t, r.ExecRunner), restoredFresh(t, memberSets(3)); got != want {
		t.Fatalf("after the resync:\n%s\nwant (restore)\n%s", got, want)
	}
}

// TestPrivilegedIPSetMembersExistSemantics: as with `ipset -exist
// restore`, adding a member someone else already added and deleting one
// someone else already deleted is no error, directly and through IPSets.
func TestPrivilegedIPSetMembersExistSemantics(t *testing.T) {
	ctx := context.Background()
	r := &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	run(t, r.ExecRunner, "ipset", "create", "cali40s:x", "hash:net", "family", "inet")
	run(t, r.ExecRunner, "ipset", "add", "cali40s:x", "10.0.0.1")
	err := r.UpdateIPSetMembers(ctx, []dataplane.IPSetMemberUpdate{{
		Set: "cali40s:x", Type: calc.HashNet, Family: "inet",
		Add: []string{"10.0.0.1", "10.0.0.2"}, Del: []string{"10.0.0.3"},
	}})
	if err != nil {
		t.Fatalf("add of a present member, del of a missing one: %v", err)
	}
	if got := ipsetSave(t, r.ExecRunner); !strings.Contains(got, "add cali40s:x 10.0.0.1\nadd cali40s:x 10.0.0.2\n") {
		t.Fatalf("set holds:\n%s", got)
	}

	r = &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	s := dataplane.NewIPSets(r)
	s.Update(memberSets(1), versions(1), nil)
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	// Someone else makes part of the next change first.
	run(t, r.ExecRunner, "ipset", "add", "cali40s:net", "10.3.0.0/24")
	run(t, r.ExecRunner, "ipset", "del", "cali40n:port", "10.1.2.4,udp:53")
	before := r.count()
	s.Update(memberSets(2), versions(2), change12)
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatalf("patch over changes made by others: %v", err)
	}
	if calls := r.since(before); len(calls) != 0 {
		t.Errorf("patch ran %q; want no process", calls)
	}
	if got, want := ipsetSave(t, r.ExecRunner), restoredFresh(t, memberSets(2)); got != want {
		t.Fatalf("after the patch:\n%s\nwant (restore)\n%s", got, want)
	}
}

// TestPrivilegedIPSetMembersUnsupported: a member the netlink path cannot
// write changes nothing there, and IPSets hands the whole apply to ipset
// restore (which reports the bad member as before).
func TestPrivilegedIPSetMembersUnsupported(t *testing.T) {
	ctx := context.Background()
	r := &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	run(t, r.ExecRunner, "ipset", "create", "cali40n:x", "hash:ip,port", "family", "inet")
	err := r.UpdateIPSetMembers(ctx, []dataplane.IPSetMemberUpdate{{
		Set: "cali40n:x", Type: calc.HashIPPort, Family: "inet",
		Add: []string{"10.0.0.9,tcp:1", "10.0.0.1,icmp:ping"},
	}})
	if !errors.Is(err, dataplane.ErrMembersUnsupported) {
		t.Fatalf("got %v, want ErrMembersUnsupported", err)
	}
	if got := ipsetSave(t, r.ExecRunner); strings.Contains(got, "add ") {
		t.Fatalf("an unsupported update changed the set:\n%s", got)
	}

	// Through IPSets: an ICMP member (valid for ipset, not written by
	// felix's renderers) goes to ipset restore, which takes it.
	spec := func(members ...string) []rules.IPSetSpec {
		return []rules.IPSetSpec{{Name: "cali40n:x", Type: calc.HashIPPort, Family: "inet", Members: calc.SortedMembers(slices.Clone(members))}}
	}
	s := dataplane.NewIPSets(r)
	s.Update(spec("10.0.0.9,tcp:1"), map[string]uint64{"cali40n:x": 1}, nil)
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	before := r.count()
	s.Update(spec("10.0.0.1,icmp:echo-request", "10.0.0.9,tcp:1"), map[string]uint64{"cali40n:x": 2},
		map[string]rules.IPSetChange{"cali40n:x": {Since: 1, Added: []string{"10.0.0.1,icmp:echo-request"}}})
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := r.since(before); !slices.Equal(calls, []string{"ipset -exist restore"}) {
		t.Errorf("ran %q; want one ipset restore", calls)
	}
	if got := ipsetSave(t, r.ExecRunner); !strings.Contains(got, "add cali40n:x 10.0.0.1,icmp:echo-request") {
		t.Fatalf("set holds:\n%s", got)
	}
}

// TestPrivilegedIPSetDestroyedBehindFelix: a member change for a set
// someone destroyed fails in-process (no silent partial state): the
// socket is dropped and, in the same apply, the kernel is read again and
// the set recreated with all its members by one ipset restore; later
// patches go in-process again (on a fresh socket).
func TestPrivilegedIPSetDestroyedBehindFelix(t *testing.T) {
	ctx := context.Background()
	r := &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	s := dataplane.NewIPSets(r)
	s.Update(memberSets(1), versions(1), nil)
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	run(t, r.ExecRunner, "ipset", "destroy", "cali60n:port")
	s.Update(memberSets(2), versions(2), change12)
	before := r.count()
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatalf("patch of a destroyed set: %v; want it repaired in the same apply", err)
	}
	if dataplane.IPSetHandleOpen(r.NetnsPath) {
		t.Error("the socket a request failed on is still registered")
	}
	if calls := r.since(before); !slices.Equal(calls, []string{"ipset save", "ipset -exist restore"}) {
		t.Errorf("apply with the failure ran %q; want a read and a restore after the in-process failure", calls)
	}
	if got, want := ipsetSave(t, r.ExecRunner), restoredFresh(t, memberSets(2)); got != want {
		t.Fatalf("after the repair:\n%s\nwant\n%s", got, want)
	}
	before = r.count()
	s.SetDesired(memberSets(3))
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := r.since(before); len(calls) != 0 {
		t.Errorf("next change ran %q; want no process", calls)
	}
	if !dataplane.IPSetHandleOpen(r.NetnsPath) {
		t.Error("no socket registered after the next change")
	}
	if got, want := ipsetSave(t, r.ExecRunner), restoredFresh(t, memberSets(3)); got != want {
		t.Fatalf("after the next change:\n%s\nwant\n%s", got, want)
	}
}

// TestPrivilegedRemoteEndpointNoProcess: through the whole pipeline as
// felix runs it (the daemon's updates and Recompute, a Dataplane with
// metrics), a remote endpoint that comes and goes changes ipset members
// in the kernel (its address, and its named port) without starting any
// process.
func TestPrivilegedRemoteEndpointNoProcess(t *testing.T) {
	ctx := context.Background()
	r := &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	metrics := dataplane.NewMetrics(prometheus.NewRegistry())
	log := slog.New(slog.DiscardHandler)
	dp := dataplane.New(dataplane.Config{Runner: r, V4: dataplane.BackendDefaultV4, Metrics: metrics, Logger: log})
	d := daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log})
	update := func(typ datastore.EventType, objs ...any) {
		var ups []datastore.Update
		for _, o := range objs {
			r := o.(v3.Resource)
			ups = append(ups, datastore.Update{Type: typ, Key: datastore.KeyOf(r), Object: r})
		}
		d.OnUpdates(ups)
	}
	update(datastore.EventAdded, ct.Synthetic(100, 10, 200)...)
	d.OnStatusUpdated(datastore.StatusInSync)
	d.Recompute()
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	restores := testutil.ToFloat64(metrics.Restores.WithLabelValues("ipset"))

	remote := ct.WEP("ns10", "extra", "node2", "caliextra", "10.250.0.1", map[string]string{"app": "a10"})
	remote.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080}}
	for step := range 4 {
		present := step%2 == 0
		if present {
			update(datastore.EventAdded, remote)
		} else {
			update(datastore.EventDeleted, remote)
		}
		before := r.count()
		d.Recompute()
		res, err := dp.Apply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if calls := r.since(before); len(calls) != 0 {
			t.Errorf("step %d: ran %q; want no process", step, calls)
		}
		if !res.SetsInProcess || res.SetsWritten == 0 || res.SetsPatched != res.SetsWritten || res.V4.Restores != 0 {
			t.Errorf("step %d: %v (in-process %v, patched %d); want sets patched in-process only", step, res, res.SetsInProcess, res.SetsPatched)
		}
		save := run(t, r.ExecRunner, "ipset", "save")
		for _, m := range []string{" 10.250.0.1\n", " 10.250.0.1,tcp:8080\n"} {
			if strings.Contains(save, m) != present {
				t.Errorf("step %d: member %q in the kernel: %v, want %v", step, strings.TrimSpace(m), !present, present)
			}
		}
	}
	if got := testutil.ToFloat64(metrics.Restores.WithLabelValues("ipset")); got != restores {
		t.Errorf("ipset restores counted: %v, want %v (none)", got, restores)
	}
}

// TestPrivilegedIPSetRestoreByProtocolNumber: sets written by `ipset
// restore` with port members' protocols as numbers hold what the names
// say: ipset save prints the names back, and a resync that reads the
// kernel again finds nothing to write.
func TestPrivilegedIPSetRestoreByProtocolNumber(t *testing.T) {
	ctx := context.Background()
	r := &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	s := dataplane.NewIPSets(r)
	s.SetDesired(memberSets(3))
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	saved := ipsetSave(t, r)
	for _, want := range []string{"add cali40n:port 10.1.2.3,tcp:8080", "add cali40n:port 10.1.2.5,sctp:9", "add cali60n:port fd00::2,udp:53", "add cali60n:port fd00::4,tcp:65535"} {
		if !strings.Contains(saved, want) {
			t.Fatalf("ipset save lacks %q:\n%s", want, saved)
		}
	}
	s.InvalidateCache()
	if n, err := s.ApplyUpdates(ctx); err != nil || n != 0 {
		t.Fatalf("resync after the restore wrote %d sets (%v), want none", n, err)
	}
}
