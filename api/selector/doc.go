// Package selector implements Calico's label selector language, the
// expressions used by NetworkPolicy, GlobalNetworkSet, IPPool and friends to
// pick endpoints by their labels, for example
//
//	app == 'web' && (tier in {'frontend', 'api'} || !has(legacy))
//
// Role in the pipeline: api/v3 validation calls Parse to reject bad
// selectors, and felix/calc parses each selector once into an evaluator tree
// and then calls Evaluate/EvaluateLabels for every endpoint update, so
// evaluation is allocation-free. String gives a canonical form so that
// selectors written differently but identical by construction (whitespace,
// quote style, set order, redundant parentheses, double negation) are
// deduplicated; UniqueID is a short hash of that form that felix later uses
// to name ipsets.
//
// # Language
//
//	k == 'v'            label k is present and equal to v
//	k != 'v'            label k is absent or not equal to v
//	k in {'a', 'b'}     label k is present with one of the values ({} matches nothing)
//	k not in {'a'}      label k is absent or has none of the values ({} matches everything)
//	k contains 's'      label k is present and contains s
//	k starts with 's'   label k is present and starts with s
//	k ends with 's'     label k is present and ends with s
//	has(k), !has(k)     label k is present / absent
//	all()               matches everything (so does the empty selector)
//	global()            matches labels without the NamespaceLabel key
//	!e, e && f, e || f, (e)
//
// "!" binds tightest, then "&&", then "||"; "&&" and "||" are
// left-associative. String literals use single or double quotes and have no
// escapes, so a value can contain one kind of quote but never both. Label
// keys are runs of ASCII letters, digits and "-_./" (Kubernetes
// qualified-name characters, e.g. projectcalico.org/namespace). Whitespace
// (space, tab, CR, LF, VT, FF) may appear between any two tokens.
//
// In Calico global() matches resources that are not namespaced (host
// endpoints, GlobalNetworkSets). Calico attaches the namespace of a
// namespaced resource as the label projectcalico.org/namespace, so here
// global() is true exactly when that label is absent.
//
// Differences from Calico's parser, all in the lenient direction: whitespace
// may include newlines and may separate "has", "all" and "global" from their
// "(". Calico accepts "notin" as a single word; this parser requires
// "not in".
//
// # Errors
//
// Parse returns a *ParseError whose Pos is the 0-based byte offset of the
// offending token (len(input) when the input ended too early), with a
// message saying what was expected, e.g.
//
//	selector "a == ": at position 5: expected a quoted string
//
// # Canonical form
//
// String renders the parsed tree deterministically:
//   - single spaces around binary operators and keywords, none inside
//     has(k), all(), global(); ", " between set members;
//   - values in double quotes, or in single quotes if they contain a double
//     quote (they then cannot contain a single quote, so this always
//     re-parses);
//   - set members sorted (byte order) and deduplicated;
//   - nested "&&" inside "&&" (and "||" inside "||") flattened, operand
//     order otherwise preserved; parentheses only where precedence needs
//     them, plus around a comparison under "!" for readability:
//     !(a == "x"), but !has(a);
//   - double negation removed;
//   - the empty selector becomes all().
//
// Only these syntactic normalisations are made: a && b and b && a, or
// a != 'x' and !(a == 'x'), stay distinct. The canonical form re-parses to
// itself.
//
// # Unique IDs
//
// UniqueID is "s:" followed by the unpadded base64url encoding of the first
// 18 bytes of SHA-224("s:" + String()): always 26 characters, the 24
// character body drawn from [A-Za-z0-9_-]. (Calico hashes the same way but
// keeps the whole digest and its canonical form differs, so the IDs are not
// interchangeable with Calico's.)
package selector
