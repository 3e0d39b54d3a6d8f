package selector

import "fmt"

// ParseError describes why a selector does not parse.
type ParseError struct {
	Selector string // the input, as given to Parse
	Pos      int    // 0-based byte offset of the problem; len(Selector) at end of input
	Msg      string // what was expected, and what was found instead
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("selector %q: at position %d: %s", e.Selector, e.Pos, e.Msg)
}
