package rules

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// The nftables backend of the renderer. The chains it renders (one rule
// model for both dataplanes) are translated rule by rule into nftables
// expressions for google/nftables, under Calico's nftables layout: one
// table named "calico" per family (ip, ip6), felix's chains named by the
// iptables table they replace ("filter-cali-FORWARD"), and base chains
// "<table>-<HOOK>" at the priorities Calico gives them next to
// kube-proxy's (NftBaseChains). Named sets keep the ipset names.
//
// Only the iptables syntax this package renders is understood (NftRule
// says so with an error otherwise); a rule that cannot be translated must
// be enforced fail-closed by the caller.

// NftTable is the name of felix's nftables table in each family (Calico's).
const NftTable = "calico"

// NftChainName is the nftables name of chain of iptables table table.
func NftChainName(table, chain string) string { return table + "-" + chain }

// Kernel constants the translation needs (linux/in.h, if.h, rtnetlink.h,
// netfilter.h, nf_tables.h); spelled out so that this package stays
// free of the system-call package.
const (
	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoICMPv6   = 58
	protoSCTP     = 132
	protoUDPLite  = 136
	ifNameSize    = 16
	rtnLocal      = 2
	nfprotoIPv4   = 2
	nfprotoIPv6   = 10
	nftaLogPrefix = 2
	nftaLogLevel  = 5
)

// NftSetName is the nftables name of ipset name: ':' (which nft's
// language does not allow in a name) becomes '-', as in Calico.
func NftSetName(name string) string { return strings.ReplaceAll(name, ":", "-") }

// NftSetRef is a named set a rule looks up; the driver resolves it to
// the set it created (a set new in the same transaction needs its ID).
type NftSetRef struct {
	Lookup *expr.Lookup
}

// NftRule is one nftables rule: its expressions and the named sets it
// looks up (whose Lookup expressions the driver completes), or, for a
// dispatch, the anonymous verdict map it looks the interface up in (the
// driver creates the map in the same transaction and completes VMapLookup).
type NftRule struct {
	Exprs      []expr.Any
	Sets       []NftSetRef
	VMap       *NftVerdictMap
	VMapLookup *expr.Lookup
}

// NftVerdictMap maps interface names to the chains to go to.
type NftVerdictMap struct {
	Ifaces, Chains []string
}

// NftIndexedRule is a translated rule with the index of the rendered
// rule it starts (a dispatch map stands for a run of them).
type NftIndexedRule struct {
	Index int
	Rule  NftRule
}

// minVMapRun is the shortest run of per-interface gotos worth a map;
// maxVMapRun the longest in one map (a map's elements travel in one
// netlink attribute, at most 64 KiB): longer runs take several maps, one
// after the other (names are unique, so the first match still wins).
const (
	minVMapRun = 2
	maxVMapRun = 400
)

// NftChainRules translates a chain of iptables table table. Runs of
// rules that only go to a chain by exact interface name ("-i caliX -g
// cali-fw-caliX", the dispatch chains) become one lookup in a verdict map:
// one lookup per packet instead of a walk over every endpoint (the first
// rule of a name wins, as in the walk). A rule that cannot be translated
// is reported in errs by index and left out: the caller must put
// something fail-closed in its place.
func NftChainRules(table string, v int, rs []Rule) (out []NftIndexedRule, errs map[int]error) {
	for i := 0; i < len(rs); {
		if j := gotoRunEnd(rs, i); j-i >= minVMapRun {
			out = append(out, NftIndexedRule{Index: i, Rule: vmapRule(table, rs[i:j])})
			i = j
			continue
		}
		nrs, err := NftRules(table, v, rs[i])
		if err != nil {
			if errs == nil {
				errs = map[int]error{}
			}
			errs[i] = err
		}
		for _, nr := range nrs {
			out = append(out, NftIndexedRule{Index: i, Rule: nr})
		}
		i++
	}
	return out, errs
}

// ifaceGoto parses "-i NAME"/"-o NAME" with "-g CHAIN" (NAME exact).
func ifaceGoto(r Rule) (flag, iface, chain string, ok bool) {
	f := strings.Fields(r.Match)
	a := strings.Fields(r.Action)
	if len(f) != 2 || (f[0] != "-i" && f[0] != "-o") || strings.HasSuffix(f[1], "+") || len(a) != 2 || a[0] != "-g" {
		return "", "", "", false
	}
	return f[0], f[1], a[1], true
}

// gotoRunEnd is the end of the run of same-direction interface gotos
// starting at i (i itself when rs[i] is not one).
func gotoRunEnd(rs []Rule, i int) int {
	flag, _, _, ok := ifaceGoto(rs[i])
	if !ok {
		return i
	}
	j := i + 1
	for ; j < len(rs) && j-i < maxVMapRun; j++ {
		if f, _, _, ok := ifaceGoto(rs[j]); !ok || f != flag {
			break
		}
	}
	return j
}

func vmapRule(table string, run []Rule) NftRule {
	flag, _, _, _ := ifaceGoto(run[0])
	key := expr.MetaKeyOIFNAME
	if flag == "-i" {
		key = expr.MetaKeyIIFNAME
	}
	m := &NftVerdictMap{}
	seen := map[string]bool{}
	for _, r := range run {
		_, iface, chain, _ := ifaceGoto(r)
		if !seen[iface] {
			seen[iface] = true
			m.Ifaces = append(m.Ifaces, iface)
			m.Chains = append(m.Chains, NftChainName(table, chain))
		}
	}
	l := &expr.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true}
	return NftRule{Exprs: []expr.Any{&expr.Meta{Key: key, Register: 1}, l}, VMap: m, VMapLookup: l}
}

// NftIfaceKey is an interface name as a map key (IFNAMSIZ bytes).
func NftIfaceKey(name string) []byte {
	k := make([]byte, ifNameSize)
	copy(k, name)
	return k
}

// NftRules translates one rendered rule of iptables table table in chain
// chain into nftables rules for ipVersion. Most give one; a rule with
// port lists gives one per combination of its ports (a packet has one
// source and one destination port, so exactly one of them matches what
// the iptables rule matched and the action is taken once).
func NftRules(table string, ipVersion int, r Rule) ([]NftRule, error) {
	m, err := parseMatch(table, ipVersion, tokens(r.Match))
	if err != nil {
		return nil, fmt.Errorf("match %q: %w", r.Match, err)
	}
	act, err := nftAction(table, ipVersion, tokens(r.Action))
	if err != nil {
		return nil, fmt.Errorf("action %q: %w", r.Action, err)
	}
	var out []NftRule
	for _, sp := range portCombos(m.sports) {
		for _, dp := range portCombos(m.dports) {
			var nr NftRule
			nr.Exprs = append(nr.Exprs, m.head...)
			nr.Exprs = append(nr.Exprs, portExprs(0, sp)...)
			nr.Exprs = append(nr.Exprs, portExprs(2, dp)...)
			nr.Exprs = append(nr.Exprs, m.tail...)
			nr.Exprs = append(nr.Exprs, act...)
			for _, e := range nr.Exprs {
				if l, ok := e.(*expr.Lookup); ok {
					nr.Sets = append(nr.Sets, NftSetRef{Lookup: l})
				}
			}
			out = append(out, cloneLookups(nr))
		}
	}
	return out, nil
}

// cloneLookups gives each rule its own Lookup expressions (the driver
// fills in set IDs per rule).
func cloneLookups(nr NftRule) NftRule {
	nr.Exprs = append([]expr.Any(nil), nr.Exprs...)
	nr.Sets = nil
	for i, e := range nr.Exprs {
		if l, ok := e.(*expr.Lookup); ok {
			c := *l
			nr.Exprs[i] = &c
			nr.Sets = append(nr.Sets, NftSetRef{Lookup: &c})
		}
	}
	return nr
}

// tokens splits iptables rule text into words, keeping "quoted strings"
// (unquoted) as one.
func tokens(s string) []string {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				out = append(out, s[1:])
				break
			}
			out = append(out, s[1:end+1])
			s = s[end+2:]
			continue
		}
		word, rest, _ := strings.Cut(s, " ")
		out = append(out, word)
		s = rest
	}
	return out
}

// nftPortRange is an inclusive range of ports; nftPorts a multiport list.
type nftPortRange struct{ lo, hi uint16 }
type nftPorts struct {
	neg    bool
	ranges []nftPortRange
}

// parsedMatch is a match in nftables expressions: head goes before the
// port matches (the protocol is checked first), tail after.
type parsedMatch struct {
	head, tail     []expr.Any
	sports, dports *nftPorts
}

// knownModules are the iptables match modules whose options parseMatch
// translates.
var knownModules = map[string]bool{"multiport": true, "set": true, "mark": true, "conntrack": true, "comment": true,
	"addrtype": true, "icmp": true, "icmp6": true, "rpfilter": true, "tcp": true, "udp": true}

// parseMatch translates the match part of a rule.
func parseMatch(table string, v int, toks []string) (parsedMatch, error) {
	var m parsedMatch
	neg := false
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		arg := func() (string, error) {
			if i+1 >= len(toks) {
				return "", fmt.Errorf("%s needs a value", t)
			}
			i++
			return toks[i], nil
		}
		switch t {
		case "!":
			neg = true
			continue
		case "-m":
			// A module's meaning is in its options; only modules whose
			// options are all understood are accepted.
			a, err := arg()
			if err == nil && (neg || !knownModules[a]) {
				err = fmt.Errorf("module %q", a)
			}
			if err != nil {
				return m, err
			}
			continue
		case "--match-set":
			name, err := arg()
			if err != nil {
				return m, err
			}
			dirs, err := arg()
			if err != nil {
				return m, err
			}
			es, err := setExprs(v, name, dirs, neg)
			if err != nil {
				return m, err
			}
			m.tail = append(m.tail, es...)
			neg = false
			continue
		case "--validmark":
			// rpfilter --validmark --invert: no reverse route for the
			// source through the input interface, with the packet's mark.
			if a, err := arg(); err != nil || a != "--invert" || neg {
				return m, fmt.Errorf("rpfilter other than --validmark --invert")
			}
			m.tail = append(m.tail,
				&expr.Fib{Register: 1, FlagSADDR: true, FlagMARK: true, FlagIIF: true, ResultOIF: true},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}})
			continue
		}
		a, err := arg()
		if err != nil {
			return m, err
		}
		if err := m.option(v, t, a, neg); err != nil {
			return m, err
		}
		neg = false
	}
	if neg {
		return m, fmt.Errorf("dangling !")
	}
	return m, nil
}

// option translates one match option t with its value a.
func (m *parsedMatch) option(v int, t, a string, neg bool) error {
	var (
		es  []expr.Any
		err error
	)
	switch t {
	case "--comment":
	case "-i", "-o":
		if a == "+" && neg {
			return fmt.Errorf("! %s +", t)
		}
		es = ifaceExprs(t == "-i", a, neg)
	case "-s", "-d":
		es, err = cidrExprs(v, t == "-s", a, neg)
	case "-p":
		es, err = protoExprs(a, neg)
		m.head = append(m.head, es...)
		return err
	case "--dports", "--dport":
		m.dports, err = parsePorts(a, neg)
	case "--sports", "--sport":
		m.sports, err = parsePorts(a, neg)
	case "--mark":
		es, err = markExprs(a, neg)
	case "--ctstate":
		es, err = ctExprs(a, neg)
	case "--dst-type":
		es, err = addrTypeExprs(a, neg, true)
	case "--src-type":
		es, err = addrTypeExprs(a, neg, false)
	case "--icmp-type", "--icmpv6-type":
		es, err = icmpExprs(a, neg)
	default:
		return fmt.Errorf("unknown match %q", t)
	}
	m.tail = append(m.tail, es...)
	return err
}

func ifaceExprs(in bool, name string, neg bool) []expr.Any {
	key := expr.MetaKeyOIFNAME
	if in {
		key = expr.MetaKeyIIFNAME
	}
	var data []byte
	if prefix, ok := strings.CutSuffix(name, "+"); ok {
		data = []byte(prefix)
	} else {
		data = make([]byte, ifNameSize)
		copy(data, name)
	}
	op := expr.CmpOpEq
	if neg {
		op = expr.CmpOpNeq
	}
	if len(data) == 0 { // "+": every interface
		return nil
	}
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: data}}
}

// addrOffset is the offset and length of the source or destination
// address in the network header.
func addrOffset(v int, src bool) (off, n uint32) {
	if v == 6 {
		if src {
			return 8, 16
		}
		return 24, 16
	}
	if src {
		return 12, 4
	}
	return 16, 4
}

func cidrExprs(v int, src bool, s string, neg bool) ([]expr.Any, error) {
	p, err := parsePrefix(s)
	if err != nil {
		return nil, err
	}
	if (v == 6) != p.Addr().Is6() {
		return nil, fmt.Errorf("%s is not IPv%d", s, v)
	}
	if p.Bits() == 0 {
		return nil, fmt.Errorf("a /0 match")
	}
	off, n := addrOffset(v, src)
	es := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}}
	if p.Bits() < int(n*8) {
		mask := make([]byte, n)
		for b := 0; b < p.Bits(); b++ {
			mask[b/8] |= 0x80 >> (b % 8)
		}
		es = append(es, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: mask, Xor: make([]byte, n)})
	}
	op := expr.CmpOpEq
	if neg {
		op = expr.CmpOpNeq
	}
	return append(es, &expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()}), nil
}

// parsePrefix reads a CIDR or a bare address (a host prefix).
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// nftProtoNumber is the IP protocol number of an iptables protocol name.
func nftProtoNumber(p string) (byte, error) {
	switch p {
	case "tcp":
		return protoTCP, nil
	case "udp":
		return protoUDP, nil
	case "sctp":
		return protoSCTP, nil
	case "udplite":
		return protoUDPLite, nil
	case "icmp":
		return protoICMP, nil
	case "ipv6-icmp", "icmpv6":
		return protoICMPv6, nil
	}
	n, err := strconv.ParseUint(p, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("unknown protocol %q", p)
	}
	return byte(n), nil
}

func protoExprs(p string, neg bool) ([]expr.Any, error) {
	n, err := nftProtoNumber(p)
	if err != nil {
		return nil, err
	}
	op := expr.CmpOpEq
	if neg {
		op = expr.CmpOpNeq
	}
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: []byte{n}}}, nil
}

func parsePorts(s string, neg bool) (*nftPorts, error) {
	pl := &nftPorts{neg: neg}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, ":")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 16); err != nil {
				return nil, fmt.Errorf("port %q", part)
			}
		}
		pl.ranges = append(pl.ranges, nftPortRange{uint16(a), uint16(b)})
	}
	return pl, nil
}

// portCombos is the alternatives a port list gives: nil (no port match),
// each range of a list, or the whole list when negated (all must fail).
func portCombos(pl *nftPorts) []*nftPorts {
	if pl == nil {
		return []*nftPorts{nil}
	}
	if pl.neg {
		return []*nftPorts{pl}
	}
	out := make([]*nftPorts, len(pl.ranges))
	for i, r := range pl.ranges {
		out[i] = &nftPorts{ranges: []nftPortRange{r}}
	}
	return out
}

// portExprs matches the transport header's 16-bit port at off (0 source,
// 2 destination) against pl: in its one range, or (negated) outside
// every range.
func portExprs(off uint32, pl *nftPorts) []expr.Any {
	if pl == nil {
		return nil
	}
	es := []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: 2}}
	for _, r := range pl.ranges {
		lo, hi := binaryutil.BigEndian.PutUint16(r.lo), binaryutil.BigEndian.PutUint16(r.hi)
		switch {
		case r.lo == r.hi && !pl.neg:
			es = append(es, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: lo})
		case r.lo == r.hi:
			es = append(es, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: lo})
		case !pl.neg:
			es = append(es, &expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: lo, ToData: hi})
		default:
			es = append(es, &expr.Range{Op: expr.CmpOpNeq, Register: 1, FromData: lo, ToData: hi})
		}
	}
	return es
}

// setExprs looks the packet up in a named set: hash:net sets by one
// address ("src" or "dst"), hash:ip,port sets ("dst,dst") by address .
// protocol . port, as NftSetKeyType types them.
func setExprs(v int, name, dirs string, neg bool) ([]expr.Any, error) {
	first, second, pair := strings.Cut(dirs, ",")
	if first != "src" && first != "dst" || pair && second != first {
		return nil, fmt.Errorf("set directions %q", dirs)
	}
	src := first == "src"
	off, n := addrOffset(v, src)
	l := &expr.Lookup{SourceRegister: 1, SetName: NftSetName(name), Invert: neg}
	if !pair {
		return []expr.Any{&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n}, l}, nil
	}
	// Concatenations live in 32-bit registers (8 = the first, which is
	// also 128-bit register 1); each part starts on a register boundary.
	protoReg, portReg := uint32(9), uint32(10)
	if v == 6 {
		protoReg, portReg = 12, 13
	}
	portOff := uint32(2)
	if src {
		portOff = 0
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg},
		&expr.Payload{DestRegister: portReg, Base: expr.PayloadBaseTransportHeader, Offset: portOff, Len: 2},
		l,
	}, nil
}

// parseValueMask reads iptables' "value/mask" (hex or decimal; a value
// alone has mask 0xffffffff).
func parseValueMask(s string) (val, mask uint32, err error) {
	vs, ms, hasMask := strings.Cut(s, "/")
	v, err := strconv.ParseUint(vs, 0, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("value %q", s)
	}
	m := uint64(0xffffffff)
	if hasMask {
		if m, err = strconv.ParseUint(ms, 0, 32); err != nil {
			return 0, 0, fmt.Errorf("mask %q", s)
		}
	}
	return uint32(v), uint32(m), nil
}

func markExprs(s string, neg bool) ([]expr.Any, error) {
	val, mask, err := parseValueMask(s)
	if err != nil {
		return nil, err
	}
	op := expr.CmpOpEq
	if neg {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: binaryutil.NativeEndian.PutUint32(val & mask)},
	}, nil
}

// Conntrack state bits (nf_conntrack_common.h) and the DNAT status bit.
const (
	ctStateInvalid     = 1
	ctStateEstablished = 2
	ctStateRelated     = 4
	ctStateNew         = 8
	ctStateUntracked   = 64
	ctStatusDstNAT     = 1 << 5
)

func ctExprs(s string, neg bool) ([]expr.Any, error) {
	var bits uint32
	key := expr.CtKeySTATE
	for st := range strings.SplitSeq(s, ",") {
		switch st {
		case "INVALID":
			bits |= ctStateInvalid
		case "ESTABLISHED":
			bits |= ctStateEstablished
		case "RELATED":
			bits |= ctStateRelated
		case "NEW":
			bits |= ctStateNew
		case "UNTRACKED":
			bits |= ctStateUntracked
		case "DNAT":
			if s != "DNAT" {
				return nil, fmt.Errorf("DNAT with other states")
			}
			key, bits = expr.CtKeySTATUS, ctStatusDstNAT
		default:
			return nil, fmt.Errorf("conntrack state %q", st)
		}
	}
	op := expr.CmpOpNeq // some bit set
	if neg {
		op = expr.CmpOpEq
	}
	return []expr.Any{
		&expr.Ct{Key: key, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(bits), Xor: make([]byte, 4)},
		&expr.Cmp{Op: op, Register: 1, Data: make([]byte, 4)},
	}, nil
}

// addrTypeExprs matches the type of the destination (dst) or source
// address as the routing table has it (LOCAL only).
func addrTypeExprs(s string, neg, dst bool) ([]expr.Any, error) {
	if s != "LOCAL" {
		return nil, fmt.Errorf("address type %q", s)
	}
	op := expr.CmpOpEq
	if neg {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: dst, FlagSADDR: !dst, ResultADDRTYPE: true},
		&expr.Cmp{Op: op, Register: 1, Data: binaryutil.NativeEndian.PutUint32(rtnLocal)},
	}, nil
}

// icmpExprs matches the ICMP type, or type and code together (one
// 2-byte compare, so that a negation negates both as iptables does).
func icmpExprs(s string, neg bool) ([]expr.Any, error) {
	ts, cs, hasCode := strings.Cut(s, "/")
	typ, err := strconv.ParseUint(ts, 10, 8)
	if err != nil {
		return nil, fmt.Errorf("ICMP type %q", s)
	}
	data := []byte{byte(typ)}
	if hasCode {
		code, err := strconv.ParseUint(cs, 10, 8)
		if err != nil {
			return nil, fmt.Errorf("ICMP code %q", s)
		}
		data = append(data, byte(code))
	}
	op := expr.CmpOpEq
	if neg {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: uint32(len(data))},
		&expr.Cmp{Op: op, Register: 1, Data: data},
	}, nil
}

// nftAction translates a rule's target.
func nftAction(table string, v int, toks []string) ([]expr.Any, error) {
	if len(toks) < 2 || toks[0] != "-j" && toks[0] != "-g" {
		return nil, fmt.Errorf("no target")
	}
	target, opts := toks[1], toks[2:]
	if toks[0] == "-g" {
		if len(opts) > 0 {
			return nil, fmt.Errorf("goto with options")
		}
		return []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: NftChainName(table, target)}}, nil
	}
	simple := map[string]expr.VerdictKind{"ACCEPT": expr.VerdictAccept, "DROP": expr.VerdictDrop, "RETURN": expr.VerdictReturn}
	if k, ok := simple[target]; ok && len(opts) == 0 {
		return []expr.Any{&expr.Verdict{Kind: k}}, nil
	}
	switch target {
	case "MARK":
		if len(opts) != 2 || opts[0] != "--set-xmark" {
			return nil, fmt.Errorf("MARK options %v", opts)
		}
		val, mask, err := parseValueMask(opts[1])
		if err != nil {
			return nil, err
		}
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(^mask), Xor: binaryutil.NativeEndian.PutUint32(val)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		}, nil
	case "NOTRACK":
		return []expr.Any{&expr.Notrack{}}, nil
	case "LOG":
		return logAction(opts)
	case "MASQUERADE":
		return []expr.Any{&expr.Masq{FullyRandom: hasOpt(opts, "--random-fully")}}, nil
	case "SNAT":
		return snatAction(v, opts)
	}
	if strings.ToUpper(target) == target || len(opts) > 0 {
		return nil, fmt.Errorf("target %q", target)
	}
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: NftChainName(table, target)}}, nil
}

func hasOpt(opts []string, o string) bool {
	for _, x := range opts {
		if x == o {
			return true
		}
	}
	return false
}

func logAction(opts []string) ([]expr.Any, error) {
	l := &expr.Log{}
	for i := 0; i+1 < len(opts); i += 2 {
		switch opts[i] {
		case "--log-prefix":
			l.Key |= 1 << nftaLogPrefix
			l.Data = []byte(opts[i+1])
		case "--log-level":
			n, err := strconv.ParseUint(opts[i+1], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("log level %q", opts[i+1])
			}
			l.Key |= 1 << nftaLogLevel
			l.Level = expr.LogLevel(n)
		default:
			return nil, fmt.Errorf("LOG option %q", opts[i])
		}
	}
	return []expr.Any{l}, nil
}

func snatAction(v int, opts []string) ([]expr.Any, error) {
	var addr netip.Addr
	for i := 0; i < len(opts); i++ {
		switch opts[i] {
		case "--to-source":
			if i+1 >= len(opts) {
				return nil, fmt.Errorf("--to-source needs an address")
			}
			a, err := netip.ParseAddr(opts[i+1])
			if err != nil {
				return nil, err
			}
			addr = a
			i++
		case "--random-fully":
		default:
			return nil, fmt.Errorf("SNAT option %q", opts[i])
		}
	}
	if !addr.IsValid() || addr.Is6() != (v == 6) {
		return nil, fmt.Errorf("SNAT address for IPv%d", v)
	}
	fam := uint32(nfprotoIPv4)
	if v == 6 {
		fam = nfprotoIPv6
	}
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: addr.AsSlice()},
		&expr.NAT{Type: expr.NATTypeSourceNAT, Family: fam, RegAddrMin: 1, FullyRandom: hasOpt(opts, "--random-fully")},
	}, nil
}

// NftIPPortKey is the key of an "ip,proto:port" member of a hash:ip,port
// set: the address, then protocol and port each padded to 4 bytes.
func NftIPPortKey(member string) ([]byte, error) {
	ip, pp, ok := strings.Cut(member, ",")
	proto, port, ok2 := strings.Cut(pp, ":")
	if !ok || !ok2 {
		return nil, fmt.Errorf("member %q is not ip,proto:port", member)
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, err
	}
	pn, err := nftProtoNumber(proto)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("member %q: port", member)
	}
	key := append(a.AsSlice(), pn, 0, 0, 0)
	key = binary.BigEndian.AppendUint16(key, uint16(n))
	return append(key, 0, 0), nil
}
