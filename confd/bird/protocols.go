package bird

import "strings"

// Protocol is one row of `birdc show protocols`.
type Protocol struct {
	Name, Proto, Table, State, Since, Info string
}

// ParseProtocols parses `birdc show protocols` output. With
// `timeformat protocol iso long` Since is "YYYY-MM-DD hh:mm:ss.sss": two
// fields, which this parser keeps together.
func ParseProtocols(out string) map[string]Protocol {
	res := map[string]Protocol{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[0] == "Name" || f[0] == "BIRD" {
			continue
		}
		p := Protocol{Name: f[0], Proto: f[1], Table: f[2], State: f[3], Since: f[4]}
		rest := f[5:]
		if len(rest) > 0 && strings.Count(f[4], "-") == 2 && strings.Count(rest[0], ":") == 2 {
			p.Since += " " + rest[0]
			rest = rest[1:]
		}
		p.Info = strings.Join(rest, " ")
		res[p.Name] = p
	}
	return res
}
