package calctest

import "github.com/tabbynet/tabby/felix/calc"

// PlainSets returns res with its ipsets' member lists as plain lists
// (res itself is not modified), so that reflect.DeepEqual compares the
// members, not how they are kept (the Engine's copy-on-write trees).
func PlainSets(res *calc.Result) *calc.Result {
	out := *res
	out.IPSets = make(map[string]*calc.IPSet, len(res.IPSets))
	for id, s := range res.IPSets {
		c := *s
		c.Members = calc.Members(s.Members.Slice()...)
		out.IPSets[id] = &c
	}
	return &out
}
