package calc

import (
	"slices"
	"testing"
)

func TestMergeMembers(t *testing.T) {
	for _, tc := range []struct {
		old     []string
		pending map[string]int8
		want    []string
	}{
		{nil, map[string]int8{"b": 1, "a": 1}, []string{"a", "b"}},
		{[]string{"b", "d"}, map[string]int8{"a": 1, "c": 1, "e": 1}, []string{"a", "b", "c", "d", "e"}},
		{[]string{"a", "b", "c"}, map[string]int8{"a": -1, "c": -1}, []string{"b"}},
		{[]string{"a", "c", "e"}, map[string]int8{"a": -1, "b": 1, "e": -1, "f": 1}, []string{"b", "c", "f"}},
		{[]string{"a"}, map[string]int8{"a": -1}, []string{}},
	} {
		got, adds, removes := mergeMembers(tc.old, tc.pending)
		if !slices.Equal(got, tc.want) {
			t.Errorf("merge %v %v = %v, want %v", tc.old, tc.pending, got, tc.want)
		}
		a, r := diffSorted(tc.old, got)
		if !slices.Equal(a, adds) || !slices.Equal(r, removes) {
			t.Errorf("merge %v %v: adds %v removes %v, diff says %v %v", tc.old, tc.pending, adds, removes, a, r)
		}
	}
}
