package dataplane

import (
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
)

// TestWriteMember: restore lines name a port member's protocol by
// number (ipset save prints the name the kernel's number stands for);
// everything else is written as it is.
func TestWriteMember(t *testing.T) {
	for _, tc := range []struct{ op, m, want string }{
		{"add", "10.0.0.1,tcp:8080", "add s 10.0.0.1,6:8080\n"},
		{"del", "10.0.0.1,udp:53", "del s 10.0.0.1,17:53\n"},
		{"add", "fd00::1,sctp:9", "add s fd00::1,132:9\n"},
		{"add", "10.0.0.1,udplite:7", "add s 10.0.0.1,136:7\n"},
		{"add", "10.0.0.1,icmp:8/0", "add s 10.0.0.1,icmp:8/0\n"},
		{"add", "10.0.0.0/24", "add s 10.0.0.0/24\n"},
		{"add", "fd00::1", "add s fd00::1\n"},
	} {
		var b strings.Builder
		writeMember(&b, tc.op, "s", tc.m)
		if b.String() != tc.want {
			t.Errorf("writeMember(%s %s) = %q, want %q", tc.op, tc.m, b.String(), tc.want)
		}
	}
}

// TestSized: a set is created with room for its members (a power of two
// of at least half as many buckets, never fewer than 1024).
func TestSized(t *testing.T) {
	create := "create s hash:net family inet hashsize 1024 maxelem 1048576"
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "hashsize 1024 "}, {2048, "hashsize 1024 "}, {2050, "hashsize 2048 "}, {150_000, "hashsize 131072 "},
	} {
		if got := sized(create, tc.n); !strings.Contains(got, tc.want) || !strings.HasSuffix(got, " maxelem 1048576") {
			t.Errorf("sized(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestListHasAsMemberSet: a member list answers whether its kernel form
// holds a member (listHas) exactly as the set of its members in kernel
// form does, /0 networks (held as two /1s) included.
func TestListHasAsMemberSet(t *testing.T) {
	spec := calc.SortedMembers([]string{"10.0.0.1/32", "10.0.0.2", "10.1.0.0/16", "10.2.0.0/32x", "fd00::1/128", "fd00::2", "fd00:1::/64",
		"10.0.0.3,tcp:80", "fd00::3,udp:53", "0.0.0.0/0", "::/0", "0.0.0.0/1"})
	st := &setState{typ: string(calc.HashNet), spec: spec}
	built := st.memberSet()
	for _, m := range []string{"10.0.0.1", "10.0.0.2", "10.1.0.0/16", "10.2.0.0/32x",
		"fd00::1", "fd00::2", "fd00:1::/64", "10.0.0.3,tcp:80", "fd00::3,udp:53",
		"10.9.9.9", "", "0.0.0.0/1", "128.0.0.0/1", "::/1", "8000::/1"} {
		if listHas(st.typ, spec, m) != built[m] {
			t.Errorf("listHas(%q) = %v, the member set says %v", m, listHas(st.typ, spec, m), built[m])
		}
	}
	for _, m := range []string{"0.0.0.0/0", "::/0"} {
		if built[m] {
			t.Errorf("the kernel form holds %s", m)
		}
	}
	ports := &setState{typ: string(calc.HashIPPort), spec: calc.Members("10.0.0.1,icmp:8/0")}
	if !ports.memberSet()["10.0.0.1,icmp:8/0"] {
		t.Error("an ICMP code 0 port member was taken for a /0 network")
	}
}
