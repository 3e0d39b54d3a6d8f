package commands

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"github.com/tabbynet/tabby/felix/rules"
)

// traceFlow traces a flow over the snapshot: pure (no datastore), so
// that tests and the benchmark run exactly what the command runs.
func traceFlow(s *policySnapshot, fromSpec, toSpec string, pkt rules.Packet) (*TraceReport, error) {
	from, err := resolveEnd(s.objs, fromSpec)
	if err != nil {
		return nil, err
	}
	to, err := resolveEnd(s.objs, toSpec)
	if err != nil {
		return nil, err
	}
	if err := pickAddrs(&from, &to); err != nil {
		return nil, err
	}
	pkt.Src, pkt.Dst = from.addr, to.addr
	path, notes := tracePath(s.objs, s.cluster, from, to, s.endpointToHost)
	staged, err := s.stagedPolicies()
	if err != nil {
		return nil, err
	}
	addrs := []netip.Addr{from.addr, to.addr}
	enforced := newTracer(s.objs, newPolicyIndex(s.objs), path, addrs, pkt)
	hops, verdict, err := enforced.run(path)
	if err != nil {
		return nil, err
	}
	rep := &TraceReport{From: from.peer(), To: to.peer(), Packet: packetReport(pkt), Verdict: string(verdict),
		Notes: append(notes, enforced.unrenderable()...)}
	for _, h := range hops {
		rep.Hops = append(rep.Hops, enforced.report(h))
	}
	if len(staged) == 0 {
		return rep, nil
	}
	pobjs := s.pendingObjects(staged)
	pending := newTracer(pobjs, newPolicyIndex(pobjs), path, addrs, pkt)
	phops, pverdict, err := pending.run(path)
	if err != nil {
		return nil, err
	}
	rep.PendingVerdict = string(pverdict)
	for i, h := range phops {
		p := pending.report(h)
		pr := &TracePending{Skipped: p.Skipped, Tiers: p.Tiers, Profiles: p.Profiles, Verdict: p.Verdict}
		if i < len(rep.Hops) {
			rep.Hops[i].Pending = pr
			continue
		}
		// The enforced trace stopped earlier (a deny): the pending one
		// goes on through hops the enforced packet never reached.
		p.Pending, p.Tiers, p.Profiles, p.Verdict, p.Note = pr, nil, nil, "NotReached", "reached only with the staged policies"
		rep.Hops = append(rep.Hops, p)
	}
	return rep, nil
}

// report is one traced hop as the report shows it.
func (t *tracer) report(h hopResult) TraceHop {
	dir := "egress"
	if h.spec.ingress {
		dir = "ingress"
	}
	out := TraceHop{Node: h.spec.node, Endpoint: h.spec.endpoint, Direction: dir, Stage: h.spec.stage, Chain: h.spec.chain,
		Skipped: h.skipped, Note: h.spec.note, Failsafe: h.trace.Failsafe}
	if h.skipped {
		out.Verdict = "Continue"
		out.Note = "not reached: accepted by an earlier doNotTrack or preDNAT policy"
		return out
	}
	out.Tiers = t.index.tierTraces(h.trace.Tiers, h.spec.ingress)
	out.Profiles = t.index.profileTraces(h.trace.Profiles, h.spec.ingress)
	out.Verdict = verdictName(h.trace.Verdict)
	if h.spec.fixed == "" && h.spec.kind == rules.TraceNormal && len(h.trace.Tiers) == 0 && !h.trace.Failsafe {
		out.Note = "no policy applies in this direction: the profiles decide"
	}
	return out
}

func packetReport(pkt rules.Packet) TracePacket {
	p := TracePacket{Protocol: protoLabel(pkt.Protocol), SrcPort: int(pkt.SrcPort), DstPort: int(pkt.DstPort)}
	if pkt.Protocol == 1 || pkt.Protocol == 58 {
		t, c := pkt.ICMPType, pkt.ICMPCode
		p.ICMPType, p.ICMPCode = &t, &c
	}
	return p
}

func protoLabel(p uint8) string {
	switch p {
	case 1:
		return "ICMP"
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 58:
		return "ICMPv6"
	case 132:
		return "SCTP"
	case 136:
		return "UDPLite"
	}
	return strconv.Itoa(int(p))
}

// unrenderable are notes on the rules of the traced chains' policies
// and profiles that felix enforces other than as written (fail closed).
func (t *tracer) unrenderable() []string {
	seen := map[string]bool{}
	var out []string
	for _, node := range slices.Sorted(maps.Keys(t.results)) {
		for _, u := range t.results[node].Unrenderable {
			if s := "felix enforces " + u.String(); !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}
