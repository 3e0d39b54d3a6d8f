// Package selector implements Calico's label selector language, the
// expressions used by NetworkPolicy, GlobalNetworkSet, IPPool and friends to
// pick endpoints by their labels, for example
//
//	app == 'web' && (tier in {'frontend', 'api'} || !has(legacy))
//
// Role in the pipeline: api/v3 validation calls Parse to reject bad
// selectors, and felix/calc parses each selector once into an evaluator tree
// and then calls Evaluate/EvaluateLabels for every endpoint update, so
// evaluation is allocation-free. String gives Calico's canonical form and
// UniqueID Calico's ID for it, which felix uses to name ipsets, so that a
// selector gets the same ipset name under Tabby as under Calico.
//
// The tokenizer and parser follow Calico's (libcalico-go/lib/selector/
// tokenizer and parser), quirks included; see "Calico's quirks" below.
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
// "!" binds tightest, then "&&", then "||". String literals use single or
// double quotes and have no escapes, so a value can contain one kind of
// quote but never both. Label keys are runs of ASCII letters, digits and
// "-_./" (Kubernetes qualified-name characters, e.g.
// projectcalico.org/namespace), at most MaxLabelLength (512) bytes.
//
// In Calico global() matches resources that are not namespaced (host
// endpoints, GlobalNetworkSets). Calico attaches the namespace of a
// namespaced resource as the label projectcalico.org/namespace, so here
// global() is true exactly when that label is absent.
//
// # Calico's quirks
//
// As in Calico's tokenizer:
//   - only space and tab are whitespace; a newline, carriage return,
//     vertical tab or form feed between tokens makes the selector invalid
//     (inside a quoted value it is part of the value);
//   - has(, all( and global( are functions only with no space before the
//     "(": "has (a)" and "all ()" are invalid (a label "has" followed by
//     "("); spaces and tabs inside the parentheses are fine;
//   - after a label, the operator words are matched with optional spaces
//     or tabs between the words of two-word operators, so "notin",
//     "startswith" and "endswith" are accepted; each operator must end at
//     a word boundary ("a inx" is invalid), but needs none before a quote
//     or brace ("a in{'x'}", "a contains'x'");
//   - the same words are ordinary labels where a label is expected
//     ("contains contains 'x'");
//   - a key longer than 512 bytes is invalid.
//
// As in Calico's parser, a run of "!" counts modulo 2 ("!!has(a)" is
// has(a)), but a "!" outside parentheses and one inside are two nodes
// ("!(!has(a))" prints as "!!has(a)"), and parentheses keep their grouping
// ("(a && b) && c" is an && whose first operand is an &&).
//
// One deliberate difference: parentheses may nest at most 100 deep, so
// that a hostile selector cannot exhaust the stack; Calico has no limit.
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
// String renders the parsed tree as Calico's Selector.String does:
//   - "&&" and "||" groups always in parentheses, operands in input
//     order and grouping kept: (a == "x" && b == "y"),
//     ((a == "x" && b == "y") && c == "z"); a parenthesised single operand
//     loses its parentheses;
//   - "!" directly before its operand: !has(a), !a == "x" (for !(a == 'x')),
//     !(a == "x" || b == "y"), and !!has(a) for !(!has(a));
//   - single spaces around binary operators and keywords, none inside
//     has(k), all(), global(); ", " between set members;
//   - values in double quotes, or in single quotes if they contain a double
//     quote;
//   - set members sorted (byte order) and deduplicated;
//   - the empty selector becomes all().
//
// The canonical form parses back to the same tree, except that "!!" (from
// a negation outside parentheses over one inside) parses back as no
// negation; Calico behaves the same, and its IDs differ accordingly.
//
// # Unique IDs
//
// UniqueID is Calico's hash.MakeUniqueID("s", String()): "s:" followed by
// the unpadded base64url encoding of the whole SHA-224 of "s:" + String(),
// 40 characters in all, the 38 character body drawn from [A-Za-z0-9_-].
package selector
