package calc

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	"github.com/tabbynet/tabby/api/selector"
)

const (
	nsLabelPrefix = "pcns."
	saLabelPrefix = "pcsa."
	nameLabel     = "projectcalico.org/name"
)

// prefixed views labels through a key prefix, so that a namespaceSelector
// "a == 'b'" reads the endpoint's "pcns.a".
type prefixed struct {
	labels map[string]string
	prefix string
}

func (p prefixed) Get(k string) (string, bool) {
	v, ok := p.labels[p.prefix+k]
	return v, ok
}

// matcher is the label part of an entity match: a selector over the
// endpoint's own labels, optionally limited to one namespace, AND'ed with a
// namespace selector (over pcns.), a service-account selector (over pcsa.)
// and a list of service-account names.
type matcher struct {
	sel       *selector.Selector // nil means all()
	namespace string             // "" means any
	nsSel     *selector.Selector
	saSel     *selector.Selector
	saNames   []string // sorted; nil means no name constraint
	id        string
}

func (m *matcher) matches(labels map[string]string) bool {
	if m.namespace != "" && labels[selector.NamespaceLabel] != m.namespace {
		return false
	}
	if m.sel != nil && !m.sel.Evaluate(labels) {
		return false
	}
	if m.nsSel != nil && !m.nsSel.EvaluateLabels(prefixed{labels, nsLabelPrefix}) {
		return false
	}
	if m.saSel != nil && !m.saSel.EvaluateLabels(prefixed{labels, saLabelPrefix}) {
		return false
	}
	if m.saNames != nil {
		n, ok := labels[saLabelPrefix+nameLabel]
		if !ok {
			return false
		}
		i := sort.SearchStrings(m.saNames, n)
		if i >= len(m.saNames) || m.saNames[i] != n {
			return false
		}
	}
	return true
}

// newMatcher parses the parts and computes the matcher's ID. A matcher that
// is just a selector has the selector's own UniqueID, as Calico names its
// selector ipsets; any other combination hashes the canonical parts.
func newMatcher(sel, namespace, nsSel, saSel string, saNames []string) (*matcher, error) {
	m := &matcher{namespace: namespace}
	var err error
	if sel != "" {
		if m.sel, err = selector.Parse(sel); err != nil {
			return nil, fmt.Errorf("selector: %w", err)
		}
	}
	if nsSel != "" {
		if m.nsSel, err = selector.Parse(nsSel); err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
	}
	if saSel != "" {
		if m.saSel, err = selector.Parse(saSel); err != nil {
			return nil, fmt.Errorf("serviceAccounts.selector: %w", err)
		}
	}
	if saNames != nil {
		m.saNames = append([]string{}, saNames...)
		sort.Strings(m.saNames)
	}
	if m.namespace == "" && m.nsSel == nil && m.saSel == nil && m.saNames == nil {
		if m.sel == nil {
			m.id = selector.MustParse("").UniqueID()
		} else {
			m.id = m.sel.UniqueID()
		}
		return m, nil
	}
	var b strings.Builder
	str := func(s *selector.Selector) string {
		if s == nil {
			return "-"
		}
		return s.String()
	}
	fmt.Fprintf(&b, "sel=%s\x00ns=%s\x00nssel=%s\x00sasel=%s\x00sanames=%q", str(m.sel), m.namespace, str(m.nsSel), str(m.saSel), m.saNames)
	m.id = shortID("s:", b.String())
	return m, nil
}

// allMatcher matches every labelled object, as newMatcher with no parts.
func allMatcher() *matcher {
	return &matcher{id: selector.MustParse("").UniqueID()}
}

// shortID is prefix + 24 base64url characters of a SHA-224 of s. (A
// selector's own ID, selector.UniqueID, is Calico's and keeps all 38;
// ipset names keep only the first 23 either way.)
func shortID(prefix, s string) string {
	sum := sha256.Sum224([]byte(prefix + s))
	return prefix + base64.RawURLEncoding.EncodeToString(sum[:18])
}
