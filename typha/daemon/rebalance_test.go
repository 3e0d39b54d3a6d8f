package daemon

import "testing"

func TestMaxConnLimit(t *testing.T) {
	r := Rebalance{MaxConnsUpper: 10000, MaxConnsLower: 400}
	for _, c := range []struct {
		typhas, nodes, syncers int
		want                   int
		reason                 string
	}{
		{1, 5000, 2, 10000, "lone typha"},
		{3, 1000, 2, 1202, "fraction+20%"}, // 2 * (1 + 1000*1.2/2)
		{3, 100, 2, 400, "configured lower limit"},
		{2, 10000, 2, 10000, "configured upper limit"},
		{5, 20, 4, 400, "configured lower limit"},
	} {
		got, reason := MaxConnLimit(r, c.typhas, c.nodes, c.syncers)
		if got != c.want || reason != c.reason {
			t.Errorf("%d typhas, %d nodes, %d syncers: %d (%s), want %d (%s)", c.typhas, c.nodes, c.syncers, got, reason, c.want, c.reason)
		}
	}
}
