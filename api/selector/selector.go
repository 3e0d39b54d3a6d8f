package selector

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// NamespaceLabel is the label Calico sets on namespaced resources;
// global() matches label sets that do not have it.
const NamespaceLabel = "projectcalico.org/namespace"

// Labels is a read-only label set. It lets callers evaluate a selector over
// a computed view, such as endpoint labels merged with profile labels,
// without building a map.
type Labels interface {
	// Get returns the value of the label and whether it is present.
	Get(key string) (value string, ok bool)
}

// MapLabels adapts a plain map to Labels. A nil map has no labels.
type MapLabels map[string]string

// Get implements Labels.
func (m MapLabels) Get(key string) (string, bool) {
	v, ok := m[key]
	return v, ok
}

// Selector is a parsed selector. It is immutable and safe for concurrent
// use. The zero Selector behaves like all().
type Selector struct {
	root      node
	canonical string
	id        string
}

// Parse parses a selector expression. The empty string, or one of only
// whitespace, means all(). Errors are of type *ParseError.
func Parse(s string) (*Selector, error) {
	root, err := parse(s)
	if err != nil {
		return nil, err
	}
	canonical := root.String()
	return &Selector{root: root, canonical: canonical, id: uniqueID(canonical)}, nil
}

// MustParse is like Parse but panics on error. It is meant for selectors
// fixed at compile time, in code and in tests.
func MustParse(s string) *Selector {
	sel, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

// Evaluate reports whether the labels match. A nil map has no labels.
func (s *Selector) Evaluate(labels map[string]string) bool {
	return s.root.eval(MapLabels(labels))
}

// EvaluateLabels reports whether the labels match.
func (s *Selector) EvaluateLabels(labels Labels) bool {
	return s.root.eval(labels)
}

// String returns the canonical form (see the package documentation).
func (s *Selector) String() string {
	if s.canonical == "" {
		return allString
	}
	return s.canonical
}

// UniqueID returns Calico's ID for the selector: "s:" followed by the
// unpadded base64url encoding of the SHA-224 of "s:" + String(), 40
// characters in all (see the package documentation).
func (s *Selector) UniqueID() string {
	if s.id == "" {
		return uniqueID(s.String())
	}
	return s.id
}

// idPrefix is the type prefix of selector IDs, as in Calico's
// hash.MakeUniqueID("s", canonical).
const idPrefix = "s:"

func uniqueID(canonical string) string {
	sum := sha256.Sum224([]byte(idPrefix + canonical))
	var b strings.Builder
	b.Grow(len(idPrefix) + base64.RawURLEncoding.EncodedLen(len(sum)))
	b.WriteString(idPrefix)
	b.WriteString(base64.RawURLEncoding.EncodeToString(sum[:]))
	return b.String()
}
