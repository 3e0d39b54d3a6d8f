package render

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Directions of a BGPFilter, in output order.
const (
	dirImport4 = iota
	dirExport4
	dirImport6
	dirExport6
	numDirs
)

// bgpFilter is a BGPFilter compiled to BIRD statements, one list per
// direction and IP version. Each list becomes one BIRD function taking
// `internal_peer` (true for iBGP), so peerType rules need no second copy.
type bgpFilter struct {
	name  string
	sym   string // BIRD-safe base name
	rules [numDirs][]string
}

func (f *bgpFilter) funcName(dir int) string {
	return f.sym + [...]string{"_import4", "_export4", "_import6", "_export6"}[dir]
}

// maxSym is BIRD's symbol length limit.
const maxSym = 64

func buildFilters(fs []v3.BGPFilter) ([]*bgpFilter, error) {
	out := make([]*bgpFilter, 0, len(fs))
	for i := range fs {
		f := &fs[i]
		bf := &bgpFilter{name: f.Name, sym: filterSym(f.Name)}
		type ruleList struct {
			dir   int
			rules []v3.BGPFilterRuleV4
		}
		lists := []ruleList{
			{dirImport4, f.Spec.ImportV4}, {dirExport4, f.Spec.ExportV4},
			{dirImport6, v6rules(f.Spec.ImportV6)}, {dirExport6, v6rules(f.Spec.ExportV6)},
		}
		for _, l := range lists {
			for j := range l.rules {
				st, err := ruleStatement(&l.rules[j], 4+2*(l.dir/2))
				if err != nil {
					return nil, fmt.Errorf("BGPFilter %q rule %d: %w", f.Name, j, err)
				}
				bf.rules[l.dir] = append(bf.rules[l.dir], st)
			}
		}
		out = append(out, bf)
	}
	slices.SortFunc(out, func(a, b *bgpFilter) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// v6rules converts IPv6 rules to the (field-identical) IPv4 rule type so one
// compiler serves both.
func v6rules(rs []v3.BGPFilterRuleV6) []v3.BGPFilterRuleV4 {
	out := make([]v3.BGPFilterRuleV4, len(rs))
	for i, r := range rs {
		out[i] = v3.BGPFilterRuleV4{
			CIDR: r.CIDR, Source: r.Source, Interface: r.Interface, MatchOperator: r.MatchOperator,
			PeerType: r.PeerType, Communities: r.Communities, ASPathPrefix: r.ASPathPrefix,
			Priority: r.Priority, Action: r.Action, Operations: r.Operations,
		}
		if pl := r.PrefixLength; pl != nil {
			out[i].PrefixLength = &v3.BGPFilterPrefixLengthV4{Min: pl.Min, Max: pl.Max}
		}
	}
	return out
}

// filterSym makes a BIRD symbol from a filter name; long names are cut and
// suffixed with a hash so the longest function name still fits.
func filterSym(name string) string {
	var b strings.Builder
	b.WriteString("bgpf_")
	for _, r := range name {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	limit := maxSym - len("_export4")
	if len(s) > limit {
		h := sha256.Sum256([]byte(name))
		s = fmt.Sprintf("%s_%x", s[:limit-9], h[:4])
	}
	return s
}

// ruleStatement compiles one rule: `if <all matches> then { <ops> accept|reject; }`.
func ruleStatement(r *v3.BGPFilterRuleV4, v int) (string, error) {
	maxLen := int32(32)
	if v == 6 {
		maxLen = 128
	}
	var conds []string
	if r.CIDR != "" {
		pfx, err := netip.ParsePrefix(r.CIDR)
		if err != nil || (pfx.Addr().Is4() != (v == 4)) {
			return "", fmt.Errorf("cidr %q is not an IPv%d CIDR", r.CIDR, v)
		}
		pfx = pfx.Masked()
		match := fmt.Sprintf("net ~ %s", pfx)
		if pl := r.PrefixLength; pl != nil {
			lo, hi := int32(pfx.Bits()), maxLen
			if pl.Min != nil {
				lo = *pl.Min
			}
			if pl.Max != nil {
				hi = *pl.Max
			}
			match = fmt.Sprintf("net ~ [ %s{%d,%d} ]", pfx, lo, hi)
		}
		switch r.MatchOperator {
		case v3.MatchOperatorEqual:
			conds = append(conds, fmt.Sprintf("net = %s", pfx))
		case v3.MatchOperatorNotEqual:
			conds = append(conds, fmt.Sprintf("net != %s", pfx))
		case v3.MatchOperatorNotIn:
			conds = append(conds, "!("+match+")")
		default: // In
			conds = append(conds, match)
		}
	} else if pl := r.PrefixLength; pl != nil {
		if pl.Min != nil {
			conds = append(conds, fmt.Sprintf("net.len >= %d", *pl.Min))
		}
		if pl.Max != nil {
			conds = append(conds, fmt.Sprintf("net.len <= %d", *pl.Max))
		}
	}
	if r.Source == v3.BGPFilterSourceRemotePeers {
		conds = append(conds, "source = RTS_BGP")
	}
	if r.Interface != "" {
		if strings.ContainsAny(r.Interface, "\"\\") {
			return "", fmt.Errorf("interface %q holds a quote or backslash", r.Interface)
		}
		conds = append(conds, fmt.Sprintf("ifname ~ %q", r.Interface))
	}
	switch r.PeerType {
	case v3.BGPFilterPeerTypeIBGP:
		conds = append(conds, "internal_peer")
	case v3.BGPFilterPeerTypeEBGP:
		conds = append(conds, "!internal_peer")
	}
	if c := r.Communities; c != nil {
		for _, val := range c.Values {
			cond, err := communityMatch(string(val))
			if err != nil {
				return "", err
			}
			conds = append(conds, cond)
		}
	}
	if len(r.ASPathPrefix) > 0 {
		conds = append(conds, fmt.Sprintf("bgp_path ~ [= %s * =]", joinAS(r.ASPathPrefix)))
	}
	if r.Priority != nil {
		conds = append(conds, fmt.Sprintf("defined(bgp_local_pref) && bgp_local_pref = %d", maxPref-*r.Priority))
	}

	var body []string
	for _, op := range r.Operations {
		switch {
		case op.AddCommunity != nil:
			st, err := communityAdd(string(op.AddCommunity.Value))
			if err != nil {
				return "", err
			}
			body = append(body, st)
		case op.PrependASPath != nil:
			p := op.PrependASPath.Prefix
			for i := len(p) - 1; i >= 0; i-- {
				body = append(body, fmt.Sprintf("bgp_path.prepend(%d);", p[i]))
			}
		case op.SetPriority != nil:
			body = append(body, fmt.Sprintf("bgp_local_pref = %d;", maxPref-op.SetPriority.Value))
		}
	}
	switch r.Action {
	case v3.BGPFilterActionAccept:
		body = append(body, "accept;")
	case v3.BGPFilterActionReject:
		body = append(body, "reject;")
	default:
		return "", fmt.Errorf("action %q is not Accept or Reject", r.Action)
	}
	if len(conds) == 0 {
		return strings.Join(body, " "), nil
	}
	return fmt.Sprintf("if (%s) then { %s }", strings.Join(conds, ") && ("), strings.Join(body, " ")), nil
}

// maxPref is BIRD's int max; LOCAL_PREF = maxPref - route priority.
const maxPref = 2147483647

func joinAS(as []numorstring.ASNumber) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

func communityMatch(c string) (string, error) {
	vals, err := parseCommunity(c)
	if err != nil {
		return "", err
	}
	if len(vals) == 2 {
		return fmt.Sprintf("(%d, %d) ~ bgp_community", vals[0], vals[1]), nil
	}
	return fmt.Sprintf("(%d, %d, %d) ~ bgp_large_community", vals[0], vals[1], vals[2]), nil
}

func communityAdd(c string) (string, error) {
	vals, err := parseCommunity(c)
	if err != nil {
		return "", err
	}
	if len(vals) == 2 {
		return fmt.Sprintf("bgp_community.add((%d, %d));", vals[0], vals[1]), nil
	}
	return fmt.Sprintf("bgp_large_community.add((%d, %d, %d));", vals[0], vals[1], vals[2]), nil
}
