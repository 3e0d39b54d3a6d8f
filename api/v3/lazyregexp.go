package v3

import (
	"regexp"
	"sync"
)

// lazyRegexp compiles expr on first use. Validation patterns are many and
// most programs (the CNI plugin, started once per pod) use few of them:
// compiling them all at package init cost ~0.5 ms per process start.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
