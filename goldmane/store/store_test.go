package store_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/goldmane/store"
)

var t0 = time.Unix(1_800_000_000, 0) // a multiple of 15 s

func flow(src, dst string, action proto.Action, policy string, start time.Time, packets int64) *proto.Flow {
	return &proto.Flow{
		Key: &proto.FlowKey{
			SourceName: src, SourceNamespace: "dev", SourceType: proto.EndpointType_WorkloadEndpoint,
			DestName: dst, DestNamespace: "shop", DestType: proto.EndpointType_WorkloadEndpoint,
			DestPort: 8080, Proto: "tcp", Reporter: proto.Reporter_Dst, Action: action,
			Policies: &proto.PolicyTrace{
				EnforcedPolicies: []*proto.PolicyHit{{Kind: proto.PolicyKind_CalicoNetworkPolicy, Namespace: "shop", Name: policy, Tier: "default", Action: action}},
				PendingPolicies:  []*proto.PolicyHit{{Kind: proto.PolicyKind_StagedNetworkPolicy, Namespace: "shop", Name: "staged-" + policy, Tier: "default", Action: proto.Action_Deny}},
			},
		},
		StartTime: start.Unix(), EndTime: start.Unix() + 5, PacketsIn: packets, BytesIn: 100 * packets,
	}
}

func names(rs []*proto.FlowResult) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Flow.Key.SourceName+">"+r.Flow.Key.DestName)
	}
	return out
}

func TestAddSumsNodesAndIntervals(t *testing.T) {
	s := store.New(store.Config{})
	now := t0.Add(time.Minute)
	if !s.Add("node-a", flow("tester", "backend", proto.Action_Deny, "deny-all", t0, 1), now) {
		t.Fatal("first flow not kept")
	}
	s.Add("node-b", flow("tester", "backend", proto.Action_Deny, "deny-all", t0.Add(2*time.Second), 2), now)
	s.Add("node-a", flow("tester", "backend", proto.Action_Deny, "deny-all", t0.Add(20*time.Second), 4), now)
	// A node repeating a flow after a reconnection is not counted twice.
	if s.Add("node-a", flow("tester", "backend", proto.Action_Deny, "deny-all", t0, 1), now) {
		t.Error("a repeated flow was kept")
	}
	res := s.List(&proto.FlowListRequest{}, now)
	if len(res.Flows) != 1 {
		t.Fatalf("got %d flows, want 1 key", len(res.Flows))
	}
	f := res.Flows[0].Flow
	if f.PacketsIn != 7 || f.StartTime != t0.Unix() || f.EndTime != t0.Unix()+30 {
		t.Errorf("sum: packets %d start %d end %d", f.PacketsIn, f.StartTime-t0.Unix(), f.EndTime-t0.Unix())
	}
	if keys, windows := s.Size(); keys != 1 || windows != 2 {
		t.Errorf("size %d keys %d windows, want 1, 2", keys, windows)
	}
	if d := s.Dropped(); d.Repeats != 1 {
		t.Errorf("dropped %+v", d)
	}
	// A window of the request: only the second interval.
	res = s.List(&proto.FlowListRequest{StartTimeGte: t0.Unix() + 15}, now)
	if len(res.Flows) != 1 || res.Flows[0].Flow.PacketsIn != 4 {
		t.Errorf("window: %v", res.Flows)
	}
}

func TestRetentionAndBounds(t *testing.T) {
	s := store.New(store.Config{MaxKeys: 2})
	s.Add("a", flow("x1", "y", proto.Action_Allow, "p", t0, 1), t0)
	s.Add("a", flow("x2", "y", proto.Action_Allow, "p", t0, 1), t0)
	if s.Add("a", flow("x3", "y", proto.Action_Allow, "p", t0, 1), t0) {
		t.Error("a third key kept past MaxKeys 2")
	}
	later := t0.Add(time.Hour + time.Minute)
	if s.Add("a", flow("x4", "y", proto.Action_Allow, "p", t0, 1), later) {
		t.Error("a flow older than the retention was kept")
	}
	s.Rollover(later)
	if keys, windows := s.Size(); keys != 0 || windows != 0 {
		t.Errorf("after an hour: %d keys %d windows", keys, windows)
	}
	if d := s.Dropped(); d.Keys != 1 || d.Old != 1 {
		t.Errorf("dropped %+v", d)
	}
	s2 := store.New(store.Config{MaxWindows: 1})
	s2.Add("a", flow("x1", "y", proto.Action_Allow, "p", t0, 1), t0)
	if s2.Add("a", flow("x1", "y", proto.Action_Allow, "p", t0.Add(15*time.Second), 1), t0.Add(15*time.Second)) {
		t.Error("a window kept past MaxWindows 1")
	}
}

func TestFiltersAndHints(t *testing.T) {
	s := store.New(store.Config{})
	s.Add("a", flow("tester", "backend", proto.Action_Deny, "deny-all", t0, 1), t0)
	s.Add("a", flow("frontend", "backend", proto.Action_Allow, "allow-frontend", t0, 1), t0)
	allow := flow("frontend", "db", proto.Action_Allow, "allow-frontend", t0, 1)
	allow.Key.Reporter = proto.Reporter_Src
	allow.Key.Policies.PendingPolicies = nil
	s.Add("a", allow, t0)
	for _, tc := range []struct {
		name   string
		filter *proto.Filter
		want   []string
	}{
		{"deny", &proto.Filter{Actions: []proto.Action{proto.Action_Deny}}, []string{"tester>backend"}},
		{"policy fuzzy", &proto.Filter{Policies: []*proto.PolicyMatch{{Name: &proto.StringMatch{Value: "deny", Type: proto.MatchType_Fuzzy}}}}, []string{"tester>backend"}},
		{"staged policy name", &proto.Filter{Policies: []*proto.PolicyMatch{{Kind: proto.PolicyKind_StagedNetworkPolicy, Name: &proto.StringMatch{Value: "staged-allow-frontend"}}}}, []string{"frontend>backend"}},
		{"pending deny", &proto.Filter{PendingActions: []proto.Action{proto.Action_Deny}}, []string{"frontend>backend", "tester>backend"}},
		{"reporter src", &proto.Filter{Reporter: proto.Reporter_Src}, []string{"frontend>db"}},
		{"dest names OR", &proto.Filter{DestNames: []*proto.StringMatch{{Value: "db"}, {Value: "nothing"}}}, []string{"frontend>db"}},
		{"fields AND", &proto.Filter{DestNames: []*proto.StringMatch{{Value: "db"}}, Actions: []proto.Action{proto.Action_Deny}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := s.List(&proto.FlowListRequest{Filter: tc.filter, SortBy: []*proto.SortOption{{SortBy: proto.SortBy_SourceName}}}, t0)
			got := names(res.Flows)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	h := s.FilterHints(&proto.FilterHintsRequest{Type: proto.FilterType_FilterTypePolicyName,
		Filter: &proto.Filter{Actions: []proto.Action{proto.Action_Allow}}}, t0)
	var got []string
	for _, v := range h.Hints {
		got = append(got, v.Value)
	}
	if diff := cmp.Diff([]string{"allow-frontend", "staged-allow-frontend"}, got); diff != "" {
		t.Errorf("hints (-want +got):\n%s", diff)
	}
	p := s.List(&proto.FlowListRequest{PageSize: 2, Page: 1}, t0)
	if len(p.Flows) != 1 || p.Meta.TotalPages != 2 || p.Meta.TotalResults != 3 {
		t.Errorf("page 1 of size 2: %d flows, meta %v", len(p.Flows), p.Meta)
	}
}

func TestSubscribe(t *testing.T) {
	s := store.New(store.Config{})
	s.Add("a", flow("old", "backend", proto.Action_Deny, "p", t0, 1), t0)
	sub, past := s.Subscribe(&proto.Filter{Actions: []proto.Action{proto.Action_Deny}}, t0.Unix())
	defer sub.Close()
	if diff := cmp.Diff([]string{"old>backend"}, names(past)); diff != "" {
		t.Errorf("past (-want +got):\n%s", diff)
	}
	s.Rollover(t0.Add(15 * time.Second)) // "old" changed since the start: sent
	if got := names(<-sub.C); !cmp.Equal(got, []string{"old>backend"}) {
		t.Errorf("first rollover: %v", got)
	}
	s.Add("a", flow("new", "backend", proto.Action_Deny, "p", t0.Add(15*time.Second), 1), t0.Add(16*time.Second))
	s.Add("a", flow("allowed", "backend", proto.Action_Allow, "p", t0.Add(15*time.Second), 1), t0.Add(16*time.Second))
	s.Rollover(t0.Add(30 * time.Second))
	if got := names(<-sub.C); !cmp.Equal(got, []string{"new>backend"}) {
		t.Errorf("second rollover: %v", got)
	}
	// A subscriber that never reads is dropped, not waited for.
	slow, _ := s.Subscribe(nil, 0)
	for i := range 40 {
		s.Add("a", flow("x", "y", proto.Action_Allow, "p", t0.Add(30*time.Second), int64(i+1)), t0.Add(31*time.Second))
		s.Rollover(t0.Add(31 * time.Second))
	}
	n := 0
	for range slow.C {
		n++
	}
	if n == 0 || n >= 40 {
		t.Errorf("slow subscriber got %d batches before being dropped", n)
	}
}
