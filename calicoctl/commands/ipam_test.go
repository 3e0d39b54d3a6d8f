package commands

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tabbynet/tabby/ipam"
)

func TestReportRoundTrip(t *testing.T) {
	rep := &ipam.GCReport{
		Leaks: []ipam.Leak{{IP: netip.MustParseAddr("fd00::5"), Block: netip.MustParsePrefix("fd00::/122"), Handle: "h6", Namespace: "ns", Pod: "p", Node: "n", Seq: 7, Reason: "r"},
			{IP: netip.MustParseAddr("10.0.0.5"), Block: netip.MustParsePrefix("10.0.0.0/26"), Handle: "h4", Node: "gone", Seq: 3, Reason: "node gone does not exist"}},
		DeadNodes:           []string{"gone"},
		EmptyUnaffineBlocks: []netip.Prefix{netip.MustParsePrefix("10.0.1.0/26")},
		OrphanHandles:       []string{"orphan"},
		Allocations:         9,
		Grace:               90 * time.Second,
	}
	js, err := json.Marshal(toCheckReport(rep, ipam.Findings{Inconsistencies: []string{"x"}}))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	os.WriteFile(path, js, 0o644)
	f, err := readReport(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.tabby.gcReport()
	if err != nil {
		t.Fatal(err)
	}
	want := *rep
	want.Leaks = []ipam.Leak{rep.Leaks[1], rep.Leaks[0]} // sorted by address
	want.Allocations = 0                                 // not needed to release
	if d := cmp.Diff(&want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("report round trip (-want +got):\n%s", d)
	}

	for name, tc := range map[string]struct{ body, want string }{
		"neither format": {`{"kind":"Other"}`, `no "allocations"`},
		"not json":       {`allocations:`, `is not an ipam check report`},
		"tabby kind":     {`{"allocations":{},"tabby":{"kind":"Other"}}`, `"tabby" is not a Tabby ipam check report (kind "Other")`},
		"unknown field":  {`{"kind":"TabbyIPAMCheckReport","bogus":1}`, `unknown field "bogus"`},
		"ip not inblock": {`{"kind":"TabbyIPAMCheckReport","leaks":[{"IP":"10.0.0.99","Block":"10.0.0.0/26"}]}`, `leaks[0]: needs an IP inside its block`},
		"bad block":      {`{"kind":"TabbyIPAMCheckReport","emptyUnaffineBlocks":["nope"]}`, `"nope" is not a CIDR`},
	} {
		os.WriteFile(path, []byte(tc.body), 0o644)
		if _, err := readReport(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func TestUsageCells(t *testing.T) {
	for _, tc := range []struct {
		cidr             string
		used             int64
		total, inUse, fr string
	}{
		{"10.0.0.0/16", 5, "65536", "5 (0%)", "65531 (100%)"},
		{"10.0.0.0/26", 48, "64", "48 (75%)", "16 (25%)"},
		{"fd00::/48", 7, "1208925819614629174706176", "7 (0%)", "1208925819614629174706169 (100%)"},
		{"10.0.0.1/32", 1, "1", "1 (100%)", "0 (0%)"},
	} {
		p := netip.MustParsePrefix(tc.cidr)
		u, f := usageCells(prefixSize(p), tc.used)
		if got := prefixSize(p).String(); got != tc.total || u != tc.inUse || f != tc.fr {
			t.Errorf("%s: %s %q %q, want %s %q %q", tc.cidr, got, u, f, tc.total, tc.inUse, tc.fr)
		}
	}
}

func TestSplitCIDR(t *testing.T) {
	for _, tc := range []struct {
		cidr  string
		parts int
		want  string
		err   string
	}{
		{cidr: "10.0.0.0/16", parts: 4, want: "10.0.0.0/18 10.0.64.0/18 10.0.128.0/18 10.0.192.0/18"},
		{cidr: "10.0.0.7/24", parts: 2, want: "10.0.0.0/25 10.0.0.128/25"},
		{cidr: "fd00::/64", parts: 2, want: "fd00::/65 fd00::8000:0:0:0/65"},
		{cidr: "10.0.0.0/31", parts: 4, err: "not large enough to be split into 4 parts"},
		{cidr: "10.0.0.0/16", parts: 3, err: "not a valid power of 2: 3"},
		{cidr: "10.0.0.0/16", parts: 1, err: "not a valid power of 2: 1"},
		{cidr: "10.0.0.0/16", parts: 0, err: "not a valid power of 2: 0"},
		{cidr: "nope", parts: 2, err: "error reading CIDR nope"},
	} {
		got, err := splitCIDR(tc.cidr, tc.parts)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s/%d: error %v, want %q", tc.cidr, tc.parts, err, tc.err)
			}
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if err != nil || strings.Join(s, " ") != tc.want {
			t.Errorf("%s/%d: %v %v, want %s", tc.cidr, tc.parts, s, err, tc.want)
		}
	}
}
