package collector

import (
	"fmt"
	"strconv"
	"strings"
)

// Verdict is one policy verdict read back from an NFLOG prefix.
type Verdict struct {
	// Action is Allow, Deny or Pass.
	Action string
	// Owner is "policy" or "profile"; EndOfTier marks a tier's default
	// deny (Tier set, Name empty), NoProfile the drop when no profile
	// accepted.
	Owner           string
	EndOfTier       bool
	NoProfile       bool
	Ingress         bool
	RuleIndex       int
	Kind            string // gnp, np, knp (policies)
	Namespace, Name string
	Tier            string // end of tier only; Lookups give a policy's
	Hashed          bool   // the prefix was shortened: Name is unknown
	Prefix          string // as logged
}

// ParsePrefix reads Calico's NFLOG prefix back: "API0|np/ns/name",
// "PRE999|profile", "DPI|tier" (end of tier), "DRI" (no profile).
func ParsePrefix(p string) (Verdict, error) {
	v := Verdict{Prefix: p, RuleIndex: -1}
	if len(p) < 3 {
		return v, fmt.Errorf("NFLOG prefix %q: too short", p)
	}
	switch p[0] {
	case 'A':
		v.Action = "Allow"
	case 'D':
		v.Action = "Deny"
	case 'P':
		v.Action = "Pass"
	default:
		return v, fmt.Errorf("NFLOG prefix %q: unknown action %q", p, p[0])
	}
	switch p[1] {
	case 'P':
		v.Owner = "policy"
	case 'R':
		v.Owner = "profile"
	default:
		return v, fmt.Errorf("NFLOG prefix %q: unknown owner %q", p, p[1])
	}
	switch p[2] {
	case 'I':
		v.Ingress = true
	case 'E':
	default:
		return v, fmt.Errorf("NFLOG prefix %q: unknown direction %q", p, p[2])
	}
	head, id, hasID := strings.Cut(p[3:], "|")
	if !hasID {
		if head != "" || v.Owner != "profile" || v.Action != "Deny" {
			return v, fmt.Errorf("NFLOG prefix %q: no ID", p)
		}
		v.NoProfile = true
		return v, nil
	}
	if head == "" {
		v.EndOfTier, v.Tier = true, id
		v.Hashed = len(p) == 63
		return v, nil
	}
	idx, err := strconv.Atoi(head)
	if err != nil || idx < 0 {
		return v, fmt.Errorf("NFLOG prefix %q: bad rule index", p)
	}
	v.RuleIndex = idx
	if len(p) == 63 {
		// Shortened (Calico never leaves a 63-character prefix as it
		// is): the middle is a hash.
		v.Hashed = true
	}
	if v.Owner == "profile" {
		v.Name = id
		return v, nil
	}
	parts := strings.SplitN(id, "/", 3)
	switch {
	case len(parts) == 2:
		v.Kind, v.Name = parts[0], parts[1]
	case len(parts) == 3:
		v.Kind, v.Namespace, v.Name = parts[0], parts[1], parts[2]
	default:
		return v, fmt.Errorf("NFLOG prefix %q: bad policy ID", p)
	}
	return v, nil
}
