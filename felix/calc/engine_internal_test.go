package calc

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSetStateSnapshotsStayValid counts random givers in and out of one
// set, publishing now and then: every published MemberList must keep the
// members of its moment while the set goes on changing (copy-on-write),
// and the pending changes at each publication must lead from the last
// list to the new one.
func TestSetStateSnapshotsStayValid(t *testing.T) {
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 7))
		set := &setState{members: memberTree(), pending: map[string]int8{}}
		ref := map[string]int{}
		type pub struct {
			list MemberList
			want []string
		}
		var pubs []pub
		var last []string
		for step := range 3000 {
			m := fmt.Sprintf("10.0.%d.%d", rng.IntN(4), rng.IntN(200))
			if rng.IntN(2) == 0 || ref[m] == 0 {
				set.count(m, +1)
				ref[m]++
			} else {
				set.count(m, -1)
				if ref[m]--; ref[m] == 0 {
					delete(ref, m)
				}
			}
			if step%37 != 0 {
				continue
			}
			adds, removes := set.pendingChanges()
			want := slices.Sorted(maps.Keys(ref))
			if set.pub != nil {
				a, r := diffSorted(last, want)
				if !slices.Equal(a, adds) || !slices.Equal(r, removes) {
					t.Fatalf("seed %d step %d: pending adds %v removes %v, the lists differ by %v %v", seed, step, adds, removes, a, r)
				}
			}
			set.flushBulk() // as publish does
			list := snapshot(set.members)
			set.pub = &IPSet{Members: list}
			set.pending = map[string]int8{}
			pubs = append(pubs, pub{list, want})
			last = want
		}
		for i, p := range pubs {
			if got := p.list.Slice(); !slices.Equal(got, p.want) || p.list.Len() != len(p.want) {
				t.Fatalf("seed %d: publication %d now holds %v, held %v", seed, i, got, p.want)
			}
			for _, m := range p.want {
				if !p.list.Has(m) {
					t.Fatalf("seed %d: publication %d lacks %s", seed, i, m)
				}
			}
			if !p.list.Equal(Members(p.want...)) {
				t.Fatalf("seed %d: publication %d not Equal to its plain list", seed, i)
			}
		}
	}
}

func TestMemberListEqual(t *testing.T) {
	a := Members("a", "b")
	if !a.Equal(Members("a", "b")) || a.Equal(Members("a")) || a.Equal(Members("a", "c")) || !(MemberList{}).Equal(Members()) {
		t.Fatal("Equal is wrong")
	}
	if got := SortedMembers([]string{"b", "a", "b"}).Slice(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("SortedMembers = %v", got)
	}
}
