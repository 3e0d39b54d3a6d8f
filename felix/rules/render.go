package rules

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
)

// Chain names and prefixes, as Calico's.
const (
	ChainPrefix         = "cali-"
	ChainFilterInput    = "cali-INPUT"
	ChainFilterForward  = "cali-FORWARD"
	ChainFilterOutput   = "cali-OUTPUT"
	ChainFromWlDispatch = "cali-from-wl-dispatch"
	ChainToWlDispatch   = "cali-to-wl-dispatch"
	ChainWlToHost       = "cali-wl-to-host"
	PrefixToWorkload    = "cali-tw-"
	PrefixFromWorkload  = "cali-fw-"
	// Workloads with the same policies and profiles in a direction share
	// one chain body (see shared.go); their cali-tw-/cali-fw- chains go
	// to it.
	PrefixToWorkloadShared   = "cali-tws-"
	PrefixFromWorkloadShared = "cali-fws-"
	ChainFromHostEp          = "cali-from-host-endpoint"
	ChainToHostEp            = "cali-to-host-endpoint"
	ChainFailsafeIn          = "cali-failsafe-in"
	ChainFailsafeOut         = "cali-failsafe-out"
	PrefixFromHostEp         = "cali-fh-"
	PrefixToHostEp           = "cali-th-"
	// Forwarded traffic through host endpoints (applyOnForward).
	ChainFromHostEpFwd  = "cali-from-hep-forward"
	ChainToHostEpFwd    = "cali-to-hep-forward"
	PrefixFromHostEpFwd = "cali-fhfw-"
	PrefixToHostEpFwd   = "cali-thfw-"
	// ChainPrerouting is the raw and mangle tables' PREROUTING chain,
	// ChainRawOutput the raw table's OUTPUT chain.
	ChainPrerouting = "cali-PREROUTING"
	ChainRawOutput  = "cali-OUTPUT"
	// ChainManglePostrouting is the mangle table's POSTROUTING chain.
	ChainManglePostrouting = "cali-POSTROUTING"
	// AllInterfaces is the chain-name suffix of an all-interfaces ("*")
	// host endpoint's chains (cali-fh-any, ...).
	AllInterfaces    = "any"
	PrefixPolicyIn   = "cali-pi-"
	PrefixPolicyOut  = "cali-po-"
	PrefixProfileIn  = "cali-pri-"
	PrefixProfileOut = "cali-pro-"
	// IPSetPrefix starts every ipset felix owns ("cali40...", "cali60...").
	IPSetPrefix = "cali"
	// MaxIPSetNameLength is the longest ipset name the kernel accepts.
	MaxIPSetNameLength = 31
)

// Config is the rendering configuration (Calico's defaults from
// DefaultConfig).
type Config struct {
	// NATOutgoingAddress is the source address of NAT outgoing traffic
	// (natOutgoingAddress); "" masquerades to the interface's.
	NATOutgoingAddress string
	// MarkAccept and MarkPass are single bits of the packet mark.
	MarkAccept, MarkPass uint32
	// FlowLogs renders Calico's NFLOG verdict marks (see nflog.go) before
	// every policy and profile verdict, end-of-tier drop and no-profile
	// drop, as Calico does when flow logs are on. A denying rule then sets
	// MarkDrop (a third mark bit) first, then logs and drops the packets
	// carrying it. NFLOGSize is how many bytes of each packet the log
	// carries (Calico's 80).
	FlowLogs  bool
	MarkDrop  uint32
	NFLOGSize int
	// WorkloadIfacePrefixes are the host-side workload interface prefixes.
	WorkloadIfacePrefixes []string
	// EndpointToHostAction is DROP, ACCEPT or RETURN: what happens to a
	// workload's packet to the host once the workload's egress policy
	// allowed it.
	EndpointToHostAction string
	// LogPrefix prefixes the kernel log lines of Log rules.
	LogPrefix string
	// FailsafeInbound and FailsafeOutbound are the host ports host
	// endpoint policy can never close (inbound: destination ports of
	// packets to the host; outbound: destination ports of packets from it).
	FailsafeInbound, FailsafeOutbound []ProtoPort
	// HostInterfaces are the node's interfaces and their addresses; a host
	// endpoint without an interface name (expectedIPs only) applies to the
	// non-workload interfaces holding one of its expected IPs. nil: such
	// host endpoints are not rendered.
	HostInterfaces map[string][]netip.Addr
	// Wireguard is WireGuard's ports, marks and devices (WithWireguard).
	Wireguard WireguardRules
}

// ProtoPort is a protocol ("tcp", "udp", "sctp") and port, optionally
// limited to a peer CIDR (the source of inbound, the destination of
// outbound packets); an entry whose CIDR is of the other IP version is
// left out.
type ProtoPort struct {
	Protocol string
	Port     uint16
	Net      string
}

// DefaultConfig is Calico's default: marks 0x10000 (accept) and 0x20000
// (pass) in the 0xffff0000 mask, "cali" interfaces, endpoint-to-host Drop.
func DefaultConfig() Config {
	return Config{
		MarkAccept: 0x10000, MarkPass: 0x20000, MarkDrop: 0x40000,
		NFLOGSize:             NFLOGDefaultSize,
		WorkloadIfacePrefixes: []string{"cali"},
		EndpointToHostAction:  "DROP",
		LogPrefix:             "calico-packet",
		// Calico's defaults: ssh, DHCP, BGP, etcd, Typha, kube-apiserver.
		FailsafeInbound:  DefaultFailsafeInbound(),
		FailsafeOutbound: DefaultFailsafeOutbound(),
	}
}

func protoPorts(s string) []ProtoPort {
	var out []ProtoPort
	for _, item := range strings.Split(s, ",") {
		proto, port, _ := strings.Cut(item, ":")
		n := 0
		fmt.Sscan(port, &n)
		out = append(out, ProtoPort{Protocol: proto, Port: uint16(n)})
	}
	return out
}

// DefaultFailsafeInbound is Calico's default inbound failsafe list.
func DefaultFailsafeInbound() []ProtoPort {
	return protoPorts("tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667")
}

// DefaultFailsafeOutbound is Calico's default outbound failsafe list.
func DefaultFailsafeOutbound() []ProtoPort {
	return protoPorts("udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667")
}

// Ruleset is everything felix wants in one IP version's iptables tables
// and ipsets.
type Ruleset struct {
	IPVersion int
	// Chains and Hooks are the filter table's; Chains are sorted by name.
	Chains []Chain
	Hooks  []Hook
	// Raw holds the untracked (doNotTrack) host endpoint policy, Mangle
	// the preDNAT policy and the egress policy of DNAT'd host traffic;
	// each with its own hooks.
	Raw, Mangle TableRules
	// Nat holds NAT outgoing (see WithNATOutgoing); a table without
	// content is left out of Tables.
	Nat TableRules
	// IPSets are the sets the chains of all tables reference, sorted by
	// name.
	IPSets []IPSetSpec
	// IPSetVersions and IPSetChanges are set by Renderer.RenderChanges
	// only. IPSetVersions identify the member content of (some of) the
	// sets by name: equal versions mean equal members. IPSetChanges say,
	// for sets whose content changed since the Renderer's previous
	// Ruleset, which members were added and removed since the content of
	// version Since.
	IPSetVersions map[string]uint64
	IPSetChanges  map[string]IPSetChange
}

// IPSetChange is the change of one set's members between two versions.
type IPSetChange struct {
	Since          uint64
	Added, Removed []string
}

// TableRules is felix's content of one iptables table other than filter.
type TableRules struct {
	// Chains are sorted by name.
	Chains []Chain
	Hooks  []Hook
}

// Tables returns the ruleset's tables by kernel table name, filter last
// (it accepts what raw and mangle accepted, so it goes in after them).
func (rs *Ruleset) Tables() []NamedTable {
	ts := []NamedTable{
		{Name: "raw", TableRules: rs.Raw},
		{Name: "mangle", TableRules: rs.Mangle},
		{Name: "filter", TableRules: TableRules{Chains: rs.Chains, Hooks: rs.Hooks}},
	}
	if len(rs.Nat.Chains) > 0 || len(rs.Nat.Hooks) > 0 {
		ts = append(ts, NamedTable{Name: "nat", TableRules: rs.Nat})
	}
	return ts
}

// NamedTable is one table's rules with the table's kernel name.
type NamedTable struct {
	Name string
	TableRules
}

// IPSetSpec is one ipset of one family.
type IPSetSpec struct {
	Name    string
	Type    calc.IPSetType
	Family  string // inet or inet6
	Members calc.MemberList
}

// CreateLine is the `ipset restore` create command for the spec's type
// under name (the real name, or a temporary name for a swap).
func (s *IPSetSpec) CreateLine(name string) string {
	return fmt.Sprintf("create %s %s family %s hashsize 1024 maxelem 1048576", name, s.Type, s.Family)
}

// IPSetName is the kernel name of calc ipset id in ipVersion.
func IPSetName(ipVersion int, id string) string {
	name := fmt.Sprintf("%s%d0%s", IPSetPrefix, ipVersion, id)
	if len(name) > MaxIPSetNameLength {
		name = name[:MaxIPSetNameLength]
	}
	return name
}

// PolicyChainName is the chain of one direction of a policy.
func PolicyChainName(prefix string, id calc.PolicyID) string {
	return limitName(prefix, id.String(), MaxChainNameLength)
}

// ProfileChainName is the chain of one direction of a profile.
func ProfileChainName(prefix, name string) string {
	return limitName(prefix, name, MaxChainNameLength)
}

type renderer struct {
	cfg     Config
	v       int
	res     *calc.Result
	usedSet map[string]string // kernel name -> calc ID
	cache   *Renderer         // nil: no reuse
}

// Render turns res into the chains (filter, raw, mangle) and ipsets of
// ipVersion (4 or 6).
func Render(cfg Config, res *calc.Result, ipVersion int) *Ruleset {
	return render(cfg, res, ipVersion, nil)
}

func render(cfg Config, res *calc.Result, ipVersion int, cache *Renderer) *Ruleset {
	r := &renderer{cfg: cfg, v: ipVersion, res: res, usedSet: map[string]string{}, cache: cache}
	rs := &Ruleset{IPVersion: ipVersion}
	rs.Chains = append(rs.Chains, r.staticChains()...)

	sec := r.endpoints(res.Endpoints)
	rs.Chains = append(rs.Chains, sec.chains...)
	maps.Copy(r.usedSet, sec.sets)

	// A policy's chain of a direction exists only while an endpoint
	// jumps to it in that direction (an ingress-only policy has no
	// cali-po- chain, as with Calico).
	policyChains := func(chains []Chain, used map[calc.PolicyID]policyDirs, untracked bool) []Chain {
		for id, dirs := range used {
			p := res.Policies[id]
			if dirs&dirIn != 0 {
				chains = append(chains, r.cachedRulesChain(r.policyChainName(PrefixPolicyIn, id), p.Ingress, r.policyOwner(PrefixPolicyIn, id, untracked)))
			}
			if dirs&dirOut != 0 {
				chains = append(chains, r.cachedRulesChain(r.policyChainName(PrefixPolicyOut, id), p.Egress, r.policyOwner(PrefixPolicyOut, id, untracked)))
			}
		}
		return chains
	}
	rs.Chains = policyChains(rs.Chains, sec.policies, false)
	for _, name := range sec.profiles {
		p := res.Profiles[name]
		rs.Chains = append(rs.Chains,
			r.cachedRulesChain(ProfileChainName(PrefixProfileIn, name), p.Ingress, r.profileOwner(PrefixProfileIn, name)),
			r.cachedRulesChain(ProfileChainName(PrefixProfileOut, name), p.Egress, r.profileOwner(PrefixProfileOut, name)))
	}
	rs.Chains = r.sortChains(rs.Chains)

	rs.Hooks = []Hook{
		{Base: "FORWARD", Target: ChainFilterForward},
		{Base: "INPUT", Target: ChainFilterInput},
		{Base: "OUTPUT", Target: ChainFilterOutput},
	}
	// raw and mangle are small (host endpoints only): sorted plainly.
	rs.Raw.Chains = sortedChains(policyChains(append(r.rawStaticChains(), sec.rawChains...), sec.rawPolicies, true))
	rs.Raw.Hooks = []Hook{
		{Base: "OUTPUT", Target: ChainRawOutput},
		{Base: "PREROUTING", Target: ChainPrerouting},
	}
	mangle := policyChains(append(r.mangleStaticChains(), sec.mangleChains...), sec.manglePolicies, false)
	for _, name := range sec.mangleProfiles {
		mangle = append(mangle, r.cachedRulesChain(ProfileChainName(PrefixProfileOut, name), res.Profiles[name].Egress, r.profileOwner(PrefixProfileOut, name)))
	}
	rs.Mangle.Chains = sortedChains(mangle)
	rs.Mangle.Hooks = []Hook{
		{Base: "POSTROUTING", Target: ChainManglePostrouting},
		{Base: "PREROUTING", Target: ChainPrerouting},
	}
	r.ipsets(rs)
	return rs
}

// ipsets fills rs's ipsets: one spec per set the chains use, with the
// members of the renderer's IP version and, for a Renderer's
// RenderChanges, their versions and changes.
func (r *renderer) ipsets(rs *Ruleset) {
	for name, id := range r.usedSet {
		set := r.res.IPSets[id]
		spec := IPSetSpec{Name: name, Type: set.Type, Family: "inet"}
		if r.v == 6 {
			spec.Family = "inet6"
		}
		var version uint64
		var change *IPSetChange
		spec.Members, version, change = r.familyMembers(set)
		rs.IPSets = append(rs.IPSets, spec)
		if r.cache != nil { // RenderChanges
			if rs.IPSetVersions == nil {
				rs.IPSetVersions = make(map[string]uint64, len(r.usedSet))
			}
			rs.IPSetVersions[name] = version
			if change != nil {
				if rs.IPSetChanges == nil {
					rs.IPSetChanges = map[string]IPSetChange{}
				}
				rs.IPSetChanges[name] = *change
			}
		}
	}
	slices.SortFunc(rs.IPSets, func(a, b IPSetSpec) int { return strings.Compare(a.Name, b.Name) })
	if c := r.cache; c != nil {
		c.setIndex = make(map[string]int, len(rs.IPSets))
		for i, spec := range rs.IPSets {
			c.setIndex[r.usedSet[spec.Name]] = i
		}
	}
}

// endpointSection is the part of a render that depends only on the local
// endpoints: their chains and the dispatch chains of every table, the
// policies and profiles they use, and the ipsets their chains reference.
// policyDirs are the directions in which endpoints use a policy.
type policyDirs uint8

const (
	dirIn policyDirs = 1 << iota
	dirOut
)

type endpointSection struct {
	eps      []calc.Endpoint // what it was built from (also keeps it alive)
	chains   []Chain
	policies map[calc.PolicyID]policyDirs
	profiles []string
	// The raw (untracked) and mangle (preDNAT) tables' endpoint and
	// dispatch chains and policies.
	rawChains, mangleChains     []Chain
	rawPolicies, manglePolicies map[calc.PolicyID]policyDirs
	// mangleProfiles are the host endpoints' profiles, whose egress chains
	// mangle POSTROUTING uses.
	mangleProfiles []string
	sets           map[string]string
}

// sortedChains sorts chains by name and drops repeated names.
func sortedChains(chains []Chain) []Chain {
	slices.SortFunc(chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(chains, func(a, b Chain) bool { return a.Name == b.Name })
}

func memberVersion(m string) int {
	addr, _, _ := strings.Cut(m, ",")
	addr, _, _ = strings.Cut(addr, "/")
	if a, err := netip.ParseAddr(addr); err == nil && a.Is6() && !a.Is4In6() {
		return 6
	}
	return 4
}

func hex(v uint32) string { return fmt.Sprintf("%#x", v) }

func (r *renderer) markSet(bit uint32) string   { return "-m mark --mark " + hex(bit) + "/" + hex(bit) }
func (r *renderer) markClear(bit uint32) string { return "-m mark --mark 0x0/" + hex(bit) }
func (r *renderer) setMark(bit uint32) string {
	return "-j MARK --set-xmark " + hex(bit) + "/" + hex(bit)
}
func (r *renderer) clearMark(bits uint32) string {
	return "-j MARK --set-xmark 0x0/" + hex(bits)
}

func (r *renderer) staticChains() []Chain {
	c := r.cfg
	accepted := Rule{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT", Comment: "Accepted by untracked or pre-DNAT policy."}
	// FORWARD keeps the accept bit: raw or mangle may have accepted the
	// packet already (then the incoming host endpoint's forward policy
	// is skipped, as in Calico).
	fwd := []Rule{
		{Action: r.clearMark(c.MarkPass)},
		{Match: r.markClear(c.MarkAccept), Action: "-j " + ChainFromHostEpFwd},
	}
	in := []Rule{}
	for _, p := range c.WorkloadIfacePrefixes {
		fwd = append(fwd,
			Rule{Match: "-i " + p + "+", Action: "-j " + ChainFromWlDispatch},
			Rule{Match: "-o " + p + "+", Action: "-j " + ChainToWlDispatch})
		in = append(in, Rule{Match: "-i " + p + "+", Action: "-g " + ChainWlToHost})
	}
	fwd = append(fwd,
		Rule{Action: "-j " + ChainToHostEpFwd},
		Rule{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT", Comment: "Policy explicitly accepted packet."},
		// Tells mangle POSTROUTING the packet is forwarded: host endpoint
		// egress policy is not for it.
		Rule{Action: r.setMark(c.MarkAccept)})
	in = append(in,
		accepted,
		Rule{Action: r.clearMark(c.MarkAccept | c.MarkPass)},
		Rule{Action: "-j " + ChainFromHostEp},
		Rule{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT", Comment: "Host endpoint policy accepted packet."})
	out := []Rule{accepted}
	for _, p := range c.WorkloadIfacePrefixes {
		out = append(out, Rule{Match: "-o " + p + "+", Action: "-j RETURN", Comment: "Host to workload is allowed."})
	}
	out = append(out,
		Rule{Action: r.clearMark(c.MarkAccept | c.MarkPass)},
		// A DNAT'd packet's output interface is still the pre-DNAT one
		// here: mangle POSTROUTING applies its host endpoint policy.
		Rule{Match: "-m conntrack ! --ctstate DNAT", Action: "-j " + ChainToHostEp},
		Rule{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT", Comment: "Host endpoint policy accepted packet."})
	wlToHost := []Rule{}
	if r.v == 6 {
		// Neighbour discovery and MLD must work for a workload to use its
		// gateway, whatever its egress policy says.
		for _, t := range []int{130, 131, 132, 133, 135, 136} {
			wlToHost = append(wlToHost, Rule{Match: fmt.Sprintf("-p ipv6-icmp -m icmp6 --icmpv6-type %d", t), Action: "-j ACCEPT"})
		}
	}
	wlToHost = append(wlToHost,
		Rule{Action: "-j " + ChainFromWlDispatch},
		Rule{Action: "-j " + c.EndpointToHostAction, Comment: "Configured DefaultEndpointToHostAction"})
	return []Chain{
		{Name: ChainFilterForward, Rules: fwd},
		{Name: ChainFilterInput, Rules: in},
		{Name: ChainFilterOutput, Rules: out},
		{Name: ChainWlToHost, Rules: wlToHost},
		{Name: ChainFailsafeIn, Rules: r.failsafe(c.FailsafeInbound, "-s", "--dports")},
		{Name: ChainFailsafeOut, Rules: r.failsafe(c.FailsafeOutbound, "-d", "--dports")},
	}
}

// endpointChain renders one direction of an endpoint in the variant kind
// (Calico's): failsafe, when set, is a chain of always-allowed traffic
// jumped to before any policy. Normal chains end in the profiles and a
// drop; forward chains have no profiles and, without applyOnForward
// policy, accept; preDNAT (mangle) and untracked (raw) chains never drop
// at the end of a tier (the filter table still decides), and untracked
// ones track no state and mark what they allow NOTRACK.
func (r *renderer) endpointChain(name, failsafe string, kind chainKind, tiers []calc.TierPolicies, profiles []string, polPrefix, profPrefix string) Chain {
	c := r.cfg
	var rules []Rule
	switch kind {
	case chainUntracked:
	case chainMangleEgress:
		// Mangle allows by returning with the accept mark (rules after
		// felix's in mangle may still want the packet).
		rules = append(rules,
			Rule{Match: "-m conntrack --ctstate RELATED,ESTABLISHED", Action: r.setMark(c.MarkAccept)},
			Rule{Match: "-m conntrack --ctstate RELATED,ESTABLISHED", Action: "-j RETURN"},
			Rule{Match: "-m conntrack --ctstate INVALID", Action: "-j DROP"})
	default:
		rules = append(rules,
			Rule{Match: "-m conntrack --ctstate RELATED,ESTABLISHED", Action: "-j ACCEPT"},
			Rule{Match: "-m conntrack --ctstate INVALID", Action: "-j DROP"})
	}
	if failsafe != "" {
		rules = append(rules, Rule{Action: "-j " + failsafe})
	}
	rules = append(rules, Rule{Action: r.clearMark(c.MarkAccept | c.MarkPass)})
	for _, t := range tiers {
		rules = append(rules, Rule{Action: r.clearMark(c.MarkPass), Comment: "Start of tier " + t.Tier})
		for _, id := range t.Policies {
			rules = append(rules, Rule{Match: r.markClear(c.MarkPass), Action: "-j " + r.policyChainName(polPrefix, id)})
			if kind == chainUntracked {
				rules = append(rules, Rule{Match: r.markSet(c.MarkAccept), Action: "-j NOTRACK"})
			}
			rules = append(rules, Rule{Match: r.markSet(c.MarkAccept), Action: "-j RETURN", Comment: "Return if policy accepted"})
		}
		if t.DefaultAction != v3.Pass && (kind == chainNormal || kind == chainForward || kind == chainMangleEgress) {
			if c.FlowLogs {
				rules = append(rules, r.nflog(r.markClear(c.MarkPass), prefixDir(polPrefix), EndOfTierNFLOGPrefix(prefixDir(polPrefix), t.Tier)))
			}
			rules = append(rules, Rule{Match: r.markClear(c.MarkPass), Action: "-j DROP", Comment: "End of tier " + t.Tier + ". Drop if no policies passed packet"})
		}
	}
	switch kind {
	case chainForward:
		if len(tiers) == 0 {
			rules = append(rules,
				Rule{Action: r.setMark(c.MarkAccept), Comment: "Allow forwarded traffic by default"},
				Rule{Action: "-j RETURN", Comment: "Return for accepted forward traffic"})
		}
	case chainNormal, chainMangleEgress:
		for _, p := range profiles {
			rules = append(rules,
				Rule{Action: "-j " + ProfileChainName(profPrefix, p)},
				Rule{Match: r.markSet(c.MarkAccept), Action: "-j RETURN", Comment: "Return if profile accepted"})
		}
		if c.FlowLogs {
			rules = append(rules, r.nflog("", prefixDir(profPrefix), NoProfileNFLOGPrefix(prefixDir(profPrefix))))
		}
		rules = append(rules, Rule{Action: "-j DROP", Comment: "Drop if no profiles matched"})
	}
	return Chain{Name: name, Rules: rules}
}

// policyRules renders the rules of one direction of a policy or profile.
// With an owner (flow logs on), each verdict is logged first, as Calico
// renders it: the rule's matches set the verdict's mark, then a rule on
// that mark logs it to NFLOG and one returns (Allow, Pass) or drops
// (Deny).
func (r *renderer) policyRules(rules []calc.Rule, owner *ruleOwner) []Rule {
	out := []Rule{}
	for i := range rules {
		rule := &rules[i]
		matches, ok := r.ruleMatches(rule)
		if !ok {
			continue
		}
		action, after := r.verdict(rule, owner)
		for _, m := range matches {
			out = append(out, Rule{Match: m, Action: action})
		}
		out = append(out, after...)
	}
	return out
}

// verdict is the action of a rule's matches and the rules after them.
func (r *renderer) verdict(rule *calc.Rule, owner *ruleOwner) (string, []Rule) {
	var mark uint32
	var letter byte
	switch rule.Action {
	case v3.Allow:
		mark, letter = r.cfg.MarkAccept, VerdictAllow
	case v3.Pass:
		mark, letter = r.cfg.MarkPass, VerdictPass
	case v3.Log:
		return fmt.Sprintf(`-j LOG --log-prefix "%s: " --log-level 5`, r.cfg.LogPrefix), nil
	default:
		// Deny; calc converts unknown actions to Deny: never render a
		// rule that does nothing in its place.
		if owner == nil {
			return "-j DROP", nil
		}
		mark, letter = r.cfg.MarkDrop, VerdictDeny
	}
	var after []Rule
	if owner != nil {
		after = append(after, r.nflog(r.markSet(mark), owner.dir, NFLOGPrefix(letter, owner.kind, owner.dir, rule.Index, owner.id)))
	}
	if letter == VerdictDeny {
		return r.setMark(mark), append(after, Rule{Match: r.markSet(mark), Action: "-j DROP"})
	}
	return r.setMark(mark), append(after, Rule{Match: r.markSet(mark), Action: "-j RETURN"})
}
