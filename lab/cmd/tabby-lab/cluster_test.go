package main

import (
	"context"
	"errors"
	"flag"
	"testing"

	"github.com/tabbynet/tabby/lab/cluster"
)

// TestClusterVerbFlags: every `tabby-lab cluster` verb defines its flags
// without a clash (a flag defined twice panics) and answers -h with
// its usage and nothing else done.
func TestClusterVerbFlags(t *testing.T) {
	for _, verb := range []string{"up", "down", "status", "env", "e2e", "probe", "forward", "pod-routes", "apply", "delete", "vm-check"} {
		t.Run(verb, func(t *testing.T) {
			if err := runCluster(context.Background(), t.TempDir(), []string{verb, "-h"}); !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s -h: %v, want flag.ErrHelp", verb, err)
			}
		})
	}
}

// TestE2ESuite: --suite picks the focus and skip, which --focus and
// --skip override; an unknown suite is refused.
func TestE2ESuite(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		wantFocus string
		wantErr   bool
		wantVM    bool
	}{
		{nil, cluster.NetpolFocus, false, false},
		{[]string{"--suite", "network"}, cluster.NetworkFocus, false, false},
		{[]string{"--suite", "network", "--focus", "DNS"}, "DNS", false, false},
		{[]string{"--suite", "netpol-sctp"}, cluster.NetpolSCTPFocus, false, true},
		{[]string{"--suite", "dns"}, "", true, false},
	} {
		fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
		var o cluster.E2EOptions
		var suite string
		e2eFlags(fs, &o, &suite, "/kube")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := e2eSuite(fs, &o, suite)
		if (err != nil) != tc.wantErr || (err == nil && o.Focus != tc.wantFocus) {
			t.Errorf("%q: focus %q, error %v; want %q (error: %v)", tc.args, o.Focus, err, tc.wantFocus, tc.wantErr)
		}
		if o.VMNodesOnly != tc.wantVM {
			t.Errorf("%q: VMNodesOnly %v, want %v", tc.args, o.VMNodesOnly, tc.wantVM)
		}
	}
}
