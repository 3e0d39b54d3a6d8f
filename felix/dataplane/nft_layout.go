package dataplane

import (
	"fmt"

	"github.com/google/nftables"
)

// nftBaseChain is one hook felix attaches to in its nftables table.
type nftBaseChain struct {
	Name     string // <table>-<HOOK>, Calico's
	Type     nftables.ChainType
	Hook     *nftables.ChainHook
	Priority *nftables.ChainPriority
}

// nftBaseChainFor is the base chain taking iptables table table's hook
// base (INPUT, FORWARD, ...) at Calico's priorities, which compose with
// kube-proxy's nftables chains (its filter chains run at -110): raw
// -300, mangle -150, filter 0, nat PREROUTING/INPUT at dstnat (-100),
// nat OUTPUT/POSTROUTING at srcnat+10 (after kube-proxy's masquerade).
func nftBaseChainFor(table, base string) (nftBaseChain, error) {
	hooks := map[string]*nftables.ChainHook{
		"PREROUTING": nftables.ChainHookPrerouting, "INPUT": nftables.ChainHookInput,
		"FORWARD": nftables.ChainHookForward, "OUTPUT": nftables.ChainHookOutput,
		"POSTROUTING": nftables.ChainHookPostrouting,
	}
	hook, ok := hooks[base]
	if !ok {
		return nftBaseChain{}, fmt.Errorf("no nftables hook for base chain %s", base)
	}
	bc := nftBaseChain{Name: table + "-" + base, Type: nftables.ChainTypeFilter, Hook: hook}
	switch table {
	case "raw":
		bc.Priority = nftables.ChainPriorityRaw
	case "mangle":
		bc.Priority = nftables.ChainPriorityMangle
		if base == "OUTPUT" {
			bc.Type = nftables.ChainTypeRoute
		}
	case "filter":
		bc.Priority = nftables.ChainPriorityFilter
	case "nat":
		bc.Type = nftables.ChainTypeNAT
		bc.Priority = nftables.ChainPriorityNATDest
		if base == "OUTPUT" || base == "POSTROUTING" {
			bc.Priority = nftables.ChainPriorityRef(*nftables.ChainPriorityNATSource + 10)
		}
	default:
		return nftBaseChain{}, fmt.Errorf("no nftables layout for table %s", table)
	}
	return bc, nil
}

// nftSetType is the nftables key type of an ipset type in ipVersion and
// whether its elements are intervals (networks).
func nftSetType(ipsetType string, ipVersion int) (nftables.SetDatatype, bool, error) {
	addr := nftables.TypeIPAddr
	if ipVersion == 6 {
		addr = nftables.TypeIP6Addr
	}
	switch ipsetType {
	case "hash:net":
		return addr, true, nil
	case "hash:ip,port":
		return nftables.MustConcatSetType(addr, nftables.TypeInetProto, nftables.TypeInetService), false, nil
	}
	return nftables.SetDatatype{}, false, fmt.Errorf("no nftables set type for %s", ipsetType)
}
