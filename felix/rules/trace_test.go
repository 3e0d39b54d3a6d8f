package rules_test

import (
	"net/netip"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestTraceChain follows packets through the scenario's chains: the
// security tier's deny of blocked sources, its Pass for prod, the
// platform tier's Log (no verdict) and default Pass, the default tier's
// named port and port range, the end-of-tier drop, IP version, and the
// profiles of an endpoint without policy.
func TestTraceChain(t *testing.T) {
	res := calc.Compute(ct.Input(ct.Node, ct.Scenario()))
	ep := func(key string) *calc.Endpoint {
		for i := range res.Endpoints {
			if res.Endpoints[i].Key == key {
				return &res.Endpoints[i]
			}
		}
		t.Fatalf("no endpoint %s", key)
		return nil
	}
	pkt := func(src, dst string, proto uint8, port uint16) rules.Packet {
		return rules.Packet{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Protocol: proto, DstPort: port, ICMPType: 8}
	}
	web, db := ep("prod/node1-k8s-web-eth0"), ep("prod/node1-k8s-db-eth0")
	cases := []struct {
		name    string
		ep      *calc.Endpoint
		ingress bool
		pkt     rules.Packet
		want    v3.Action
		tiers   int
		last    string // the last tier's end, or the deciding policy's action
	}{
		{"client to web's named port: allowed in the default tier", web, true, pkt("10.65.0.3", "10.65.0.1", 6, 8080), v3.Allow, 2, "Allow"},
		{"client to web's port range", web, true, pkt("10.65.0.3", "10.65.0.1", 6, 9050), v3.Allow, 2, "Allow"},
		{"client to web, other port: end of the default tier", web, true, pkt("10.65.0.3", "10.65.0.1", 6, 7000), v3.Deny, 2, "Deny"},
		{"blocked source: denied in the security tier", web, true, pkt("203.0.113.9", "10.65.0.1", 6, 8080), v3.Deny, 1, "Deny"},
		{"db egress: no policy, the profile allows", db, false, pkt("10.65.0.2", "10.65.0.1", 6, 8080), v3.Allow, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tiers, profiles := tc.ep.Egress, tc.ep.Profiles
			if tc.ingress {
				tiers = tc.ep.Ingress
			}
			got := rules.TraceChain(res, rules.TraceChainInput{Kind: rules.TraceNormal, Ingress: tc.ingress, Tiers: tiers, Profiles: profiles}, tc.pkt)
			if got.Verdict != tc.want || len(got.Tiers) != tc.tiers {
				t.Fatalf("verdict %s through %d tiers, want %s through %d: %+v", got.Verdict, len(got.Tiers), tc.want, tc.tiers, got)
			}
			if tc.tiers == 0 {
				if len(got.Profiles) == 0 || got.Profiles[0].Action != v3.Allow {
					t.Errorf("profiles: %+v", got.Profiles)
				}
				return
			}
			last := got.Tiers[len(got.Tiers)-1]
			end := string(last.EndOfTier)
			if end == "" {
				end = string(last.Policies[len(last.Policies)-1].Action)
			}
			if end != tc.last {
				t.Errorf("last tier %s ends %q, want %q: %+v", last.Tier, end, tc.last, got)
			}
		})
	}
}

// TestTraceFailsafe: a failsafe port is accepted before any policy in
// the filter table, and only skips the policy of raw and mangle chains.
func TestTraceFailsafe(t *testing.T) {
	res := &calc.Result{}
	tiers := []calc.TierPolicies{{Tier: "default", DefaultAction: v3.Deny}}
	p := rules.Packet{Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2"), Protocol: 6, DstPort: 22}
	in := rules.TraceChainInput{Kind: rules.TraceNormal, Ingress: true, Tiers: tiers, Failsafe: rules.DefaultFailsafeInbound()}
	if got := rules.TraceChain(res, in, p); !got.Failsafe || got.Verdict != v3.Allow {
		t.Errorf("ssh to the host: %+v", got)
	}
	in.Kind = rules.TracePreDNAT
	if got := rules.TraceChain(res, in, p); !got.Failsafe || got.Verdict != "" {
		t.Errorf("ssh in mangle: %+v", got)
	}
	in.Kind = rules.TraceNormal
	p.DstPort = 23
	if got := rules.TraceChain(res, in, p); got.Failsafe || got.Verdict != v3.Deny {
		t.Errorf("telnet to the host: %+v", got)
	}
}
