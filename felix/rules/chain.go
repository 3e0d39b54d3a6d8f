package rules

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// MaxChainNameLength is the longest chain name iptables accepts.
const MaxChainNameLength = 28

// Chain is one iptables chain felix owns.
type Chain struct {
	Name  string
	Rules []Rule
}

// Rule is one rule: Match is the match part ("-i cali+ -p tcp ..."), may
// be empty; Action the target part ("-j DROP"); Comment optional free text.
// NFLOG, when set (a Prefix), is the action instead of Action: a policy
// verdict logged for flow logs (kept structured for other dataplanes; a
// value, so that rules stay comparable with ==).
type Rule struct {
	Match   string
	Action  string
	Comment string
	NFLOG   NFLOG
}

// HashedRule is a rule rendered for iptables-restore with its ownership
// hash.
type HashedRule struct {
	Hash string
	// Spec is everything after "-A <chain> ".
	Spec string
}

// hashLen is the length of the rule hash in the comment, as in Calico.
const hashLen = 16

// Hashed renders the chain's rules. Each hash covers the chain name, the
// previous rule's hash and the rule text, so identical chains always hash
// identically and any change moves the hashes of the rules after it.
func (c *Chain) Hashed() []HashedRule {
	out := make([]HashedRule, 0, len(c.Rules))
	prev := ""
	for _, r := range c.Rules {
		body := r.body()
		sum := sha256.Sum224([]byte(c.Name + "\x00" + prev + "\x00" + body))
		h := base64.RawURLEncoding.EncodeToString(sum[:])[:hashLen]
		prev = h
		spec := `-m comment --comment "cali:` + h + `"`
		if body != "" {
			spec += " " + body
		}
		out = append(out, HashedRule{Hash: h, Spec: spec})
	}
	return out
}

func (r Rule) body() string {
	var parts []string
	if r.Match != "" {
		parts = append(parts, r.Match)
	}
	if r.Comment != "" {
		parts = append(parts, `-m comment --comment "`+r.Comment+`"`)
	}
	if r.NFLOG.Prefix != "" {
		parts = append(parts, r.NFLOG.iptables())
	} else {
		parts = append(parts, r.Action)
	}
	return strings.Join(parts, " ")
}

// limitName returns prefix+id, or prefix + "_" + a hash of id when that
// would be longer than iptables allows or id has characters we do not put
// in chain names.
func limitName(prefix, id string, maxLen int) string {
	if len(prefix)+len(id) <= maxLen && safeName(id) {
		return prefix + id
	}
	sum := sha256.Sum224([]byte(id))
	return prefix + "_" + base64.RawURLEncoding.EncodeToString(sum[:])[:maxLen-len(prefix)-1]
}

func safeName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return s != "" && s[0] != '_'
}

// Hook is a jump from a kernel base chain into felix's chains.
type Hook struct {
	Base, Target string
}

// Rule returns the hook as a hashed rule in the base chain.
func (h Hook) Rule() HashedRule {
	c := Chain{Name: h.Base, Rules: []Rule{{Action: "-j " + h.Target}}}
	return c.Hashed()[0]
}

// RestoreText renders the whole content felix owns in every table (raw,
// mangle, filter) as iptables-restore input (for a fresh namespace: it
// declares every chain and inserts the hooks). The dataplane driver
// renders its own, minimal, transactions; this is the reference text and
// the benchmark floor.
func (rs *Ruleset) RestoreText() string {
	var b strings.Builder
	for _, t := range rs.Tables() {
		b.WriteString(t.RestoreText())
	}
	return b.String()
}

// RestoreText renders one table's content as iptables-restore input.
func (t *NamedTable) RestoreText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", t.Name)
	for _, c := range t.Chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c.Name)
	}
	for _, c := range t.Chains {
		for _, r := range c.Hashed() {
			fmt.Fprintf(&b, "-A %s %s\n", c.Name, r.Spec)
		}
	}
	for _, h := range t.Hooks {
		fmt.Fprintf(&b, "-I %s 1 %s\n", h.Base, h.Rule().Spec)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// IPSetRestoreText renders the sets as `ipset restore` input that creates
// them fresh.
func (rs *Ruleset) IPSetRestoreText() string {
	var b strings.Builder
	for _, s := range rs.IPSets {
		b.WriteString(s.CreateLine(s.Name))
		b.WriteByte('\n')
		for m := range s.Members.All() {
			fmt.Fprintf(&b, "add %s %s\n", s.Name, m)
		}
	}
	return b.String()
}
