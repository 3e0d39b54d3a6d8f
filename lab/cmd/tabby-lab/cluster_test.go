package main

import (
	"context"
	"errors"
	"flag"
	"testing"
)

// TestClusterVerbFlags: every `tabby-lab cluster` verb defines its flags
// without a clash (a flag defined twice panics) and answers -h with
// its usage and nothing else done.
func TestClusterVerbFlags(t *testing.T) {
	for _, verb := range []string{"up", "down", "status", "env", "e2e", "probe", "forward", "apply", "delete"} {
		t.Run(verb, func(t *testing.T) {
			if err := runCluster(context.Background(), t.TempDir(), []string{verb, "-h"}); !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s -h: %v, want flag.ErrHelp", verb, err)
			}
		})
	}
}
