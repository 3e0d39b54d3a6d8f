package rules

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/tabbynet/tabby/felix/calc"
)

// NFLOG groups and sizes, as Calico's: verdicts on packets entering an
// endpoint (ingress policy) go to group 1, on packets leaving one (egress)
// to group 2; each log carries the first 80 bytes of the packet.
const (
	NFLOGInboundGroup  uint16 = 1
	NFLOGOutboundGroup uint16 = 2
	NFLOGDefaultSize          = 80
	// NFLOGPrefixMaxLength is the kernel's limit (with the terminating
	// NUL); a prefix of 63 characters or more is shortened (see
	// NFLOGPrefix).
	NFLOGPrefixMaxLength = 64
)

// Verdict letters of NFLOG prefixes (Calico's RuleAction, RuleOwnerType and
// RuleDir bytes).
const (
	VerdictAllow   byte = 'A'
	VerdictDeny    byte = 'D'
	VerdictPass    byte = 'P'
	OwnerPolicy    byte = 'P'
	OwnerProfile   byte = 'R'
	DirIngress     byte = 'I'
	DirEgress      byte = 'E'
	nflogKeepChars      = 10
)

// NFLOG is a rule's action when it logs a policy verdict to the kernel's
// nfnetlink_log group Group with Prefix (the verdict, see NFLOGPrefix),
// copying Size bytes of the packet. It is kept structured, not as
// iptables text, so that every dataplane (iptables, nftables) renders the
// same verdict marks.
type NFLOG struct {
	Group  uint16
	Prefix string
	Size   int
}

// iptables renders the action as iptables does (Calico's NflogAction with
// --nflog-size).
func (n *NFLOG) iptables() string {
	return fmt.Sprintf("-j NFLOG --nflog-group %d --nflog-prefix %s --nflog-size %d", n.Group, n.Prefix, n.Size)
}

// PolicyNFLOGID is Calico's ID of a policy in NFLOG prefixes: the kind's
// short name, the namespace if any, and the name ("gnp/name",
// "np/ns/name", "knp/ns/name" for a Kubernetes NetworkPolicy, which Tabby
// stores as the NetworkPolicy "knp.default.<name>"), "kcnp/name" for a
// Kubernetes ClusterNetworkPolicy (the GlobalNetworkPolicy "kcnp.<name>").
func PolicyNFLOGID(id calc.PolicyID) string {
	if id.Namespace == "" {
		if name, ok := strings.CutPrefix(id.Name, ClusterPolicyPrefix); ok {
			return "kcnp/" + name
		}
		return "gnp/" + id.Name
	}
	if name, ok := strings.CutPrefix(id.Name, KubernetesPolicyPrefix); ok {
		return "knp/" + id.Namespace + "/" + name
	}
	return "np/" + id.Namespace + "/" + id.Name
}

// KubernetesPolicyPrefix starts the names of the NetworkPolicies that
// stand for Kubernetes NetworkPolicies.
const KubernetesPolicyPrefix = "knp.default."

// ClusterPolicyPrefix starts the names of the GlobalNetworkPolicies that
// stand for Kubernetes ClusterNetworkPolicies.
const ClusterPolicyPrefix = "kcnp."

// NFLOGPrefix is the prefix of a rule's verdict: action, owner (policy or
// profile), direction, the rule's index and the owner's ID
// ("API0|np/ns/name"), shortened as Calico shortens it when 63 characters
// or longer.
func NFLOGPrefix(action, owner, dir byte, idx int, id string) string {
	return shortenNFLOGPrefix(fmt.Sprintf("%c%c%c%d|%s", action, owner, dir, idx, id))
}

// EndOfTierNFLOGPrefix is the prefix of a tier's default deny
// ("DPI|tier").
func EndOfTierNFLOGPrefix(dir byte, tier string) string {
	return shortenNFLOGPrefix(fmt.Sprintf("%c%c%c|%s", VerdictDeny, OwnerPolicy, dir, tier))
}

// NoProfileNFLOGPrefix is the prefix of the drop when no profile accepted
// ("DRI").
func NoProfileNFLOGPrefix(dir byte) string {
	return fmt.Sprintf("%c%c%c", VerdictDeny, OwnerProfile, dir)
}

// shortenNFLOGPrefix keeps a prefix shorter than 63 characters as it is;
// a longer one (or one of exactly 63, so that no written prefix can pose
// as a shortened one) becomes its first 10 characters, "_" and 41
// characters of its SHA-256 (base64url), "_" and its last 10 characters:
// 63 in all, as Calico's maybeHash.
func shortenNFLOGPrefix(p string) string {
	const max = NFLOGPrefixMaxLength - 1
	if len(p) < max {
		return p
	}
	sum := sha256.Sum256([]byte(p))
	hashLen := max - 2*nflogKeepChars - 1
	h := "_" + base64.RawURLEncoding.EncodeToString(sum[:])[:hashLen-1]
	return p[:nflogKeepChars] + h + "_" + p[len(p)-nflogKeepChars:]
}

// ruleOwner names the policy or profile direction whose rules a chain
// holds, for the NFLOG prefixes of its verdicts; nil renders no NFLOG.
type ruleOwner struct {
	kind, dir byte
	id        string
}

func (o *ruleOwner) group() uint16 { return nflogGroup(o.dir) }

func nflogGroup(dir byte) uint16 {
	if dir == DirIngress {
		return NFLOGInboundGroup
	}
	return NFLOGOutboundGroup
}

// policyOwner is the NFLOG owner of a policy chain (prefix cali-pi- or
// cali-po-), nil when flow logs are off or the chain is untracked (Calico
// does not log untracked verdicts: the cost per packet).
func (r *renderer) policyOwner(prefix string, id calc.PolicyID, untracked bool) *ruleOwner {
	if !r.cfg.FlowLogs || untracked {
		return nil
	}
	return &ruleOwner{kind: OwnerPolicy, dir: prefixDir(prefix), id: PolicyNFLOGID(id)}
}

// profileOwner is the NFLOG owner of a profile chain.
func (r *renderer) profileOwner(prefix, name string) *ruleOwner {
	if !r.cfg.FlowLogs {
		return nil
	}
	return &ruleOwner{kind: OwnerProfile, dir: prefixDir(prefix), id: name}
}

func prefixDir(prefix string) byte {
	if prefix == PrefixPolicyIn || prefix == PrefixProfileIn {
		return DirIngress
	}
	return DirEgress
}

// nflog returns the rule logging a verdict with prefix to dir's group
// when match holds.
func (r *renderer) nflog(match string, dir byte, prefix string) Rule {
	return Rule{Match: match, NFLOG: NFLOG{Group: nflogGroup(dir), Prefix: prefix, Size: r.cfg.NFLOGSize}}
}
