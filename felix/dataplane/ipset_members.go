package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tabbynet/tabby/felix/calc"
)

// IPSetMembers is implemented by a Runner that can add and delete members
// of existing ipsets in-process, without an `ipset restore` process
// (ExecRunner does, through netlink). IPSets uses it for an apply that
// only changes members of sets the kernel already has: a remote endpoint
// coming or going, the common change at cluster scale, where a process
// per change was most of felix's CPU and of the change's latency.
// Anything else (creating, swapping, destroying sets) still goes through
// ipset restore.
type IPSetMembers interface {
	// UpdateIPSetMembers applies updates in order, each set's deletions
	// before its additions, with the semantics of `ipset -exist restore`:
	// adding a member that is there or deleting one that is not is no
	// error. When a set type or member is not one it can write, it
	// returns an error wrapping ErrMembersUnsupported having changed
	// nothing. Any other error may leave the updates partly applied.
	UpdateIPSetMembers(ctx context.Context, updates []IPSetMemberUpdate) error
}

// IPSetFiller is implemented by a Runner that can fill sets just created
// in-process, in large batches (ExecRunner does: a few netlink messages of
// ~1,000 members each). IPSets uses it for the members of the sets an
// apply creates when they are many (a start at cluster scale): no rule
// uses those sets until the apply's iptables part, so a set filled in
// several messages is never seen half full.
type IPSetFiller interface {
	// FillIPSets adds the members to the existing sets, with the
	// semantics of `ipset -exist restore`. When a set type or member is
	// not one it can write, it returns an error wrapping
	// ErrMembersUnsupported having changed nothing. Any other error may
	// leave the members partly added.
	FillIPSets(ctx context.Context, fills []IPSetMemberUpdate) error
}

// IPSetMemberUpdate is the member changes of one existing set.
type IPSetMemberUpdate struct {
	Set    string
	Type   calc.IPSetType
	Family string // "inet" or "inet6"
	// Del and Add are members as `ipset save` prints them: "10.1.2.3",
	// "10.1.0.0/16", "fd00::1" for hash:net; "10.1.2.3,tcp:8080" for
	// hash:ip,port.
	Del, Add []string
}

// ErrMembersUnsupported says an IPSetMembers cannot write some member of
// an update (an unknown set type or member syntax); nothing was changed,
// and the caller should use ipset restore instead.
var ErrMembersUnsupported = errors.New("ipset members not writable in-process")

// portProtocols are the IP protocol numbers of the protocols a
// hash:ip,port member names, as ipset save prints them.
var portProtocols = map[string]uint8{"tcp": 6, "udp": 17, "sctp": 132, "udplite": 136}

// ipsetMember is a member parsed into the fields a netlink request
// carries.
type ipsetMember struct {
	addr  netip.Addr
	bits  uint8  // hash:net: the prefix length
	proto uint8  // hash:ip,port: the IP protocol number
	port  uint16 // hash:ip,port
}

// parseIPSetMember parses member m of a set of type typ and family as
// felix renders them (see calc.IPSet). What it does not know (other types,
// port names, ranges, an address of the other family, IPv4-mapped IPv6,
// a /0 network, which the kernel would take for a single address) is an
// error wrapping ErrMembersUnsupported, so that ipset restore, with its
// own parser and error messages, handles it as before.
func parseIPSetMember(typ calc.IPSetType, family, m string) (ipsetMember, error) {
	var e ipsetMember
	unsupported := func(why string) (ipsetMember, error) {
		return ipsetMember{}, fmt.Errorf("%w: %s member %q of family %s: %s", ErrMembersUnsupported, typ, m, family, why)
	}
	addr := m
	switch typ {
	case calc.HashNet:
		a, bits, hasBits := strings.Cut(m, "/")
		addr = a
		if hasBits {
			n, err := strconv.ParseUint(bits, 10, 8)
			if err != nil || n == 0 {
				return unsupported("prefix length")
			}
			e.bits = uint8(n)
		}
	case calc.HashIPPort:
		a, pp, ok := strings.Cut(m, ",")
		if !ok {
			return unsupported("no port")
		}
		addr = a
		proto, port, ok := strings.Cut(pp, ":")
		if !ok {
			return unsupported("no protocol")
		}
		num, ok := portProtocols[proto]
		if !ok {
			return unsupported("protocol")
		}
		e.proto = num
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return unsupported("port")
		}
		e.port = uint16(n)
	default:
		return unsupported("set type")
	}
	a, err := netip.ParseAddr(addr)
	if err != nil || a.Zone() != "" {
		return unsupported("address")
	}
	switch {
	case family == "inet" && a.Is4():
	case family == "inet6" && a.Is6() && !a.Is4In6():
	default:
		return unsupported("address family")
	}
	e.addr = a
	if typ == calc.HashNet {
		switch {
		case e.bits == 0:
			e.bits = uint8(a.BitLen())
		case int(e.bits) > a.BitLen():
			return unsupported("prefix length")
		}
	}
	return e, nil
}
