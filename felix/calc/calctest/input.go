package calctest

import (
	"fmt"

	"github.com/tabbynet/tabby/felix/calc"
)

// Input sorts resources of any supported kind into a calc.Input for node.
func Input(node string, objs []any) calc.Input {
	in := calc.Input{Node: node}
	for _, o := range objs {
		if !in.Add(o) {
			panic(fmt.Sprintf("calctest.Input: unsupported %T", o))
		}
	}
	return in
}
