package commands

import (
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// printTrace writes a trace report for people.
func printTrace(w io.Writer, r *TraceReport) {
	fmt.Fprintf(w, "Flow: %s -> %s %s\n", peerLabel(r.From), peerLabel(r.To), packetLabel(r.Packet))
	for _, h := range r.Hops {
		fmt.Fprintf(w, "\n%s at %s (node %s, %s, chain %s)\n", titleCase(h.Direction), h.Endpoint, h.Node, h.Stage, h.Chain)
		if h.Note != "" {
			fmt.Fprintf(w, "  (%s)\n", h.Note)
		}
		printHopBody(w, "  ", h.Failsafe, h.Tiers, h.Profiles, h.Verdict, h.Skipped)
		if p := h.Pending; p != nil && pendingDiffers(h, p) {
			fmt.Fprintf(w, "  pending, with the staged policies enforced:\n")
			printHopBody(w, "    ", false, p.Tiers, p.Profiles, p.Verdict, p.Skipped)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
	fmt.Fprintf(w, "\nVerdict: %s\n", r.Verdict)
	if r.PendingVerdict != "" {
		fmt.Fprintf(w, "Pending verdict (staged policies enforced): %s\n", r.PendingVerdict)
	}
}

// pendingDiffers reports whether the pending trace of a hop says
// anything the enforced one does not.
func pendingDiffers(h TraceHop, p *TracePending) bool {
	a, _ := yaml.Marshal(TracePending{Skipped: h.Skipped, Tiers: h.Tiers, Profiles: h.Profiles, Verdict: h.Verdict})
	b, _ := yaml.Marshal(p)
	return string(a) != string(b)
}

func printHopBody(w io.Writer, ind string, failsafe bool, tiers []TraceTier, profiles []TraceProfile, verdict string, skipped bool) {
	if failsafe {
		fmt.Fprintf(w, "%sfailsafe port: accepted before any policy\n", ind)
	}
	if skipped {
		fmt.Fprintf(w, "%s=> %s\n", ind, verdict)
		return
	}
	for _, t := range tiers {
		fmt.Fprintf(w, "%stier %s\n", ind, t.Name)
		for _, p := range t.Policies {
			name := p.Name
			if p.Namespace != "" {
				name = p.Namespace + "/" + p.Name
			}
			fmt.Fprintf(w, "%s  %s %s [%s]: %s\n", ind, p.Kind, name, chainLabel(p.Kind, p.Chain), matchLabel(p.Match, p.Logged))
			printRule(w, ind+"      ", p.Match)
		}
		if t.EndOfTier != "" {
			fmt.Fprintf(w, "%s  end of tier: %s\n", ind, t.EndOfTier)
		}
	}
	for _, p := range profiles {
		fmt.Fprintf(w, "%sprofile %s [%s]: %s\n", ind, p.Name, p.Chain, matchLabel(p.Match, p.Logged))
		printRule(w, ind+"    ", p.Match)
	}
	if len(profiles) > 0 && verdict == "Deny" && (profiles[len(profiles)-1].Match == nil || profiles[len(profiles)-1].Match.Action == "Pass") {
		fmt.Fprintf(w, "%sno profile allowed the packet\n", ind)
	}
	fmt.Fprintf(w, "%s=> %s\n", ind, verdict)
}

// chainLabel is a policy's chain as the text output names it: a staged
// policy has none (felix never renders one).
func chainLabel(kind, chain string) string {
	if strings.HasPrefix(kind, "Staged") {
		return "staged: no chain"
	}
	return chain
}

func matchLabel(m *TraceMatch, logged []int) string {
	s := "no match"
	if m != nil {
		s = fmt.Sprintf("rule %d matches: %s", m.Index, m.Action)
	}
	if len(logged) > 0 {
		s += fmt.Sprintf(" (logged by rules %v)", logged)
	}
	return s
}

func printRule(w io.Writer, ind string, m *TraceMatch) {
	if m == nil || m.Rule == nil {
		return
	}
	b, err := yaml.Marshal(m.Rule)
	if err != nil {
		return
	}
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", ind, l)
	}
	if m.Note != "" {
		fmt.Fprintf(w, "%s(%s)\n", ind, m.Note)
	}
}

func peerLabel(p TracePeer) string {
	switch p.Kind {
	case "IP":
		return p.IP
	case "HostEndpoint":
		return fmt.Sprintf("hostendpoint/%s (%s)", p.Name, p.IP)
	}
	name := p.Workload
	if name == "" {
		name = p.Name
	}
	return fmt.Sprintf("%s/%s (%s)", p.Namespace, name, p.IP)
}

func packetLabel(p TracePacket) string {
	s := p.Protocol
	switch {
	case p.ICMPType != nil:
		s += fmt.Sprintf(" type %d code %d", *p.ICMPType, *p.ICMPCode)
	case p.DstPort != 0:
		s += fmt.Sprintf("/%d", p.DstPort)
	}
	if p.SrcPort != 0 {
		s += fmt.Sprintf(" (source port %d)", p.SrcPort)
	}
	return s
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
