package rules

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/tabbynet/tabby/felix/calc"
)

// maxMultiportEntries is what one multiport match holds; a range counts
// twice.
const maxMultiportEntries = 15

// SplitPorts chunks ranges so that each chunk fits one multiport match.
func SplitPorts(ports []calc.PortRange) [][]calc.PortRange {
	var out [][]calc.PortRange
	var cur []calc.PortRange
	n := 0
	for _, p := range ports {
		w := 1
		if p.Min != p.Max {
			w = 2
		}
		if n+w > maxMultiportEntries {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, p)
		n += w
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func portList(ports []calc.PortRange) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (r *renderer) protoName(p uint8) string {
	switch p {
	case 1:
		return "icmp"
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 58:
		return "ipv6-icmp"
	case 132:
		return "sctp"
	case 136:
		return "udplite"
	}
	return fmt.Sprint(p)
}

func (r *renderer) set(id string) string {
	name := IPSetName(r.v, id)
	r.usedSet[name] = id
	return name
}

func (r *renderer) family(nets []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range nets {
		if (r.v == 4) == n.Addr().Is4() {
			out = append(out, n)
		}
	}
	return out
}

// entity renders one side of a rule: matches every rendered rule carries
// (AND), and alternatives of which each rendered rule carries one (OR).
// ok is false when the side cannot match in this IP version.
func (r *renderer) entity(e *calc.EntityMatch, dir string) (common, alts []string, ok bool) {
	flag, ports := "-s", "--sports"
	if dir == "dst" {
		flag, ports = "-d", "--dports"
	}
	if len(e.Nets) > 0 {
		nets := r.family(e.Nets)
		switch {
		case len(nets) == 0:
			return nil, nil, false
		case len(nets) == 1:
			common = append(common, flag+" "+nets[0].String())
		default:
			common = append(common, "-m set --match-set "+r.set(e.NetSet)+" "+dir)
		}
	}
	positiveFlag := len(e.Nets) > 0 && len(r.family(e.Nets)) == 1
	if nets := r.family(e.NotNets); len(nets) == 1 && !positiveFlag {
		common = append(common, "! "+flag+" "+nets[0].String())
	} else if len(nets) > 0 {
		common = append(common, "-m set ! --match-set "+r.set(e.NotNetSet)+" "+dir)
	}
	if e.SelSet != "" {
		common = append(common, "-m set --match-set "+r.set(e.SelSet)+" "+dir)
	}
	if e.NotSelSet != "" {
		common = append(common, "-m set ! --match-set "+r.set(e.NotSelSet)+" "+dir)
	}
	if e.SvcSet != "" && dir == "dst" {
		// A Service's endpoints with their ports (hash:ip,port).
		common = append(common, "-m set --match-set "+r.set(e.SvcSet)+" dst,dst")
	} else if e.SvcSet != "" {
		common = append(common, "-m set --match-set "+r.set(e.SvcSet)+" src")
	}
	for _, chunk := range SplitPorts(e.NotPorts) {
		common = append(common, "-m multiport ! "+ports+" "+portList(chunk))
	}
	for _, id := range e.NotNamedPortSets {
		common = append(common, "-m set ! --match-set "+r.set(id)+" "+dir+","+dir)
	}
	for _, chunk := range SplitPorts(e.Ports) {
		alts = append(alts, "-m multiport "+ports+" "+portList(chunk))
	}
	for _, id := range e.NamedPortSets {
		alts = append(alts, "-m set --match-set "+r.set(id)+" "+dir+","+dir)
	}
	if len(alts) == 0 {
		alts = []string{""}
	}
	return common, alts, true
}

func (r *renderer) icmp(m *calc.ICMPMatch, not bool) string {
	if m == nil {
		return ""
	}
	val := fmt.Sprint(m.Type)
	if m.Code != nil {
		val += fmt.Sprintf("/%d", *m.Code)
	}
	neg := ""
	if not {
		neg = "! "
	}
	if r.v == 6 {
		return "-m icmp6 " + neg + "--icmpv6-type " + val
	}
	return "-m icmp " + neg + "--icmp-type " + val
}

// ruleMatches returns the match strings of the iptables rules one policy
// rule becomes (several when it needs an OR), or ok=false when the rule
// does not apply to this IP version.
func (r *renderer) ruleMatches(rule *calc.Rule) ([]string, bool) {
	if rule.IPVersion != 0 && rule.IPVersion != r.v {
		return nil, false
	}
	var common []string
	if rule.Protocol != 0 {
		common = append(common, "-p "+r.protoName(rule.Protocol))
	}
	if rule.NotProtocol != 0 {
		common = append(common, "! -p "+r.protoName(rule.NotProtocol))
	}
	srcCommon, srcAlts, ok := r.entity(&rule.Src, "src")
	if !ok {
		return nil, false
	}
	dstCommon, dstAlts, ok := r.entity(&rule.Dst, "dst")
	if !ok {
		return nil, false
	}
	common = append(common, srcCommon...)
	common = append(common, dstCommon...)
	for _, s := range []string{r.icmp(rule.ICMP, false), r.icmp(rule.NotICMP, true)} {
		if s != "" {
			common = append(common, s)
		}
	}
	var out []string
	for _, s := range srcAlts {
		for _, d := range dstAlts {
			parts := append([]string{}, common...)
			for _, a := range []string{s, d} {
				if a != "" {
					parts = append(parts, a)
				}
			}
			out = append(out, strings.Join(parts, " "))
		}
	}
	return out, true
}
