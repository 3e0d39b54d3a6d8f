package dataplane_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

// brokenFiller is the fake kernel with an IPSetFiller that always fails.
type brokenFiller struct {
	*fake.Kernel
	calls int
}

func (b *brokenFiller) FillIPSets(context.Context, []dataplane.IPSetMemberUpdate) error {
	b.calls++
	return errors.New("netlink socket gone")
}

// TestIPSetFillFailureFallsBackToRestore: when the in-process fill of new
// sets fails, their members are written by ipset restore instead: the
// kernel ends up with every member.
func TestIPSetFillFailureFallsBackToRestore(t *testing.T) {
	var members []string
	for i := range 12_000 {
		members = append(members, fmt.Sprintf("10.%d.%d.%d", 64+i>>16, (i>>8)&255, i&255))
	}
	k := &brokenFiller{Kernel: fake.NewKernel()}
	s := dataplane.NewIPSets(k)
	s.SetDesired([]rules.IPSetSpec{{Name: "cali40s:big", Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(slices.Clone(members))}})
	if _, err := s.ApplyUpdates(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k.calls != 1 {
		t.Fatalf("filler called %d times, want 1", k.calls)
	}
	if got := k.Members("cali40s:big"); !slices.Equal(got, calc.SortedMembers(members).Slice()) {
		t.Fatalf("the kernel holds %d members, want %d", len(got), len(members))
	}
}

// TestDataplaneFillsThroughItsRunner: the Dataplane (with metrics, which
// wrap its runner) fills large new sets through the runner's
// IPSetFiller, and says so in the apply's result; the failed fill here
// falls back to a restore and is logged with its cause.
func TestDataplaneFillsThroughItsRunner(t *testing.T) {
	var members []string
	for i := range 12_000 {
		members = append(members, fmt.Sprintf("10.%d.%d.%d/32", 64+i>>16, (i>>8)&255, i&255))
	}
	k := &brokenFiller{Kernel: fake.NewKernel()}
	var logs bytes.Buffer
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: dataplane.NewMetrics(prometheus.NewRegistry())})
	rs := &rules.Ruleset{IPVersion: 4, IPSets: []rules.IPSetSpec{{Name: "cali40s:big", Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(members)}}}
	dp.SetDesired(rs)
	res, err := dp.Apply(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if k.calls != 1 || res.SetsFilled {
		t.Fatalf("filler called %d times, SetsFilled %v: want 1, false (it failed)", k.calls, res.SetsFilled)
	}
	if got := len(k.Members("cali40s:big")); got != 12_000 {
		t.Fatalf("the kernel holds %d members, want 12000", got)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "netlink socket gone") {
		t.Fatalf("the failed fill was not logged as a warning with its cause:\n%s", logs.String())
	}
}
