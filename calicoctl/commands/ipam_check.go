package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// reportKind names the JSON file ipam check -o writes, so release
// --from-report refuses anything else.
const reportKind = "TabbyIPAMCheckReport"

// checkReport is the file ipam check -o writes and ipam release
// --from-report reads. It carries everything ipam.ReleaseLeaks needs to
// re-check each finding before acting on it.
type checkReport struct {
	Kind                string      `json:"kind"`
	Version             string      `json:"version"`
	GraceSeconds        float64     `json:"graceSeconds"`
	Allocations         int         `json:"allocations"`
	Unowned             int         `json:"unownedAllocations"`
	Leaks               []ipam.Leak `json:"leaks"`
	DeadNodes           []string    `json:"deadNodes"`
	EmptyUnaffineBlocks []string    `json:"emptyUnaffineBlocks"`
	OrphanHandles       []string    `json:"orphanHandles"`
	Inconsistencies     []string    `json:"inconsistencies"`
	// OverlappingBlocks: blocks sharing addresses (of overlapping pools)
	// and addresses allocated in both; for people, release ignores it.
	OverlappingBlocks []string `json:"overlappingBlocks"`
	// BlocksOutsidePools: blocks no pool contains (a pool deleted while
	// they held addresses); for people, release ignores it.
	BlocksOutsidePools []string `json:"blocksOutsidePools"`
}

func (r *checkReport) gcReport() (*ipam.GCReport, error) {
	rep := &ipam.GCReport{
		Leaks:         r.Leaks,
		DeadNodes:     r.DeadNodes,
		OrphanHandles: r.OrphanHandles,
		Grace:         time.Duration(r.GraceSeconds * float64(time.Second)),
	}
	for _, s := range r.EmptyUnaffineBlocks {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("emptyUnaffineBlocks: %q is not a CIDR", s)
		}
		rep.EmptyUnaffineBlocks = append(rep.EmptyUnaffineBlocks, p)
	}
	for i, l := range r.Leaks {
		if !l.IP.IsValid() || !l.Block.IsValid() || !l.Block.Contains(l.IP) {
			return nil, fmt.Errorf("leaks[%d]: needs an IP inside its block (got ip %q, block %q)", i, l.IP, l.Block)
		}
	}
	return rep, nil
}

func newIPAMCheckCmd(a *app) *cobra.Command {
	var (
		output                 string
		grace                  time.Duration
		showAllIPs, showProbIP bool
	)
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Find leaked addresses and IPAM inconsistencies (changes nothing)",
		Long: `Check every IPAM allocation against its owner: a pod's address leaks
when its WorkloadEndpoint is gone (or no longer lists it), a node's address
(e.g. a tunnel address) when the Node is gone. Also reports nodes that are
gone but still hold blocks, empty blocks without an owner, handles nothing
uses, and bookkeeping inconsistencies. Nothing is changed; write a report
with -o and free what it lists with ipam release --from-report.`,
		Example: `  calicoctl ipam check
  calicoctl ipam check -o report.json
  calicoctl ipam release --from-report=report.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if grace < 0 {
				return fmt.Errorf("--grace=%v is negative: give a duration like 1m, or 0s to report even brand-new allocations", grace)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmdContext(cmd)
			fmt.Fprintln(a.stdout, "Checking IPAM for leaks and inconsistencies...")
			rep, err := ipam.New(c, ipam.Config{Logger: a.log()}).CheckLeaks(ctx, grace)
			if err != nil {
				return fmt.Errorf("checking IPAM: %w", a.friendly(err))
			}
			found, err := consistency(ctx, c)
			if err != nil {
				return err
			}
			cr := toCheckReport(rep, found)
			cr.Version = a.clientVersion()
			var st *ipamState
			var owners map[netip.Addr][]string
			if output != "" || showAllIPs || showProbIP {
				if st, err = loadIPAMState(ctx, c); err != nil {
					return err
				}
				if owners, err = ipOwners(ctx, c); err != nil {
					return err
				}
				showIPs(a.stdout, st, cr, owners, showAllIPs, showProbIP)
			}
			printCheck(a.stdout, cr)
			if output != "" {
				full, err := buildCalicoReport(ctx, c, st, cr, owners)
				if err != nil {
					return err
				}
				js, err := json.MarshalIndent(full, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(output, append(js, '\n'), 0o644); err != nil {
					return fmt.Errorf("writing the report: %w", err)
				}
				fmt.Fprintf(a.stdout, "Report written to %s; free what it lists with: calicoctl ipam release --from-report=%s\n", output, output)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Path to output report file (Calico's report format, with Tabby's findings under \"tabby\"), for ipam release --from-report")
	cmd.Flags().BoolVar(&showAllIPs, "show-all-ips", false, "Print all IPs that are checked.")
	cmd.Flags().BoolVar(&showProbIP, "show-problem-ips", false, "Print all IPs that are leaked or not allocated properly.")
	cmd.Flags().DurationVar(&grace, "grace", defaultGrace, "ignore allocations younger than this (a pod being set up holds its address before its endpoint exists)")
	return cmd
}

// toCheckReport is the report of a leak check and a consistency check,
// every list non-nil (the JSON shows [] rather than null).
func toCheckReport(rep *ipam.GCReport, found ipam.Findings) *checkReport {
	cr := &checkReport{
		Kind: reportKind, Version: Version, GraceSeconds: rep.Grace.Seconds(),
		Allocations: rep.Allocations, Unowned: rep.Unowned,
		Leaks: slices.Clone(rep.Leaks), DeadNodes: rep.DeadNodes, OrphanHandles: rep.OrphanHandles,
		Inconsistencies: found.Inconsistencies, OverlappingBlocks: found.Overlaps, BlocksOutsidePools: found.OutsidePools,
	}
	slices.SortFunc(cr.Leaks, func(x, y ipam.Leak) int { return x.IP.Compare(y.IP) })
	for _, p := range rep.EmptyUnaffineBlocks {
		cr.EmptyUnaffineBlocks = append(cr.EmptyUnaffineBlocks, p.String())
	}
	slices.Sort(cr.EmptyUnaffineBlocks)
	for _, s := range []*[]string{&cr.DeadNodes, &cr.EmptyUnaffineBlocks, &cr.OrphanHandles, &cr.Inconsistencies, &cr.OverlappingBlocks, &cr.BlocksOutsidePools} {
		if *s == nil {
			*s = []string{}
		}
	}
	if cr.Leaks == nil {
		cr.Leaks = []ipam.Leak{}
	}
	return cr
}

// printCheck prints a report for people; it changes nothing.
func printCheck(w io.Writer, cr *checkReport) {
	fmt.Fprintf(w, "Found %d allocations (%d without owner attributes, never reported as leaks).\n", cr.Allocations, cr.Unowned)
	fmt.Fprintf(w, "Found %d leaked address(es)%s\n", len(cr.Leaks), listEnd(len(cr.Leaks)))
	for _, l := range cr.Leaks {
		fmt.Fprintf(w, "  %s (block %s, handle %s): %s\n", l.IP, l.Block, l.Handle, l.Reason)
	}
	fmt.Fprintf(w, "Found %d deleted node(s) still holding blocks: %s\n", len(cr.DeadNodes), joinOr(cr.DeadNodes))
	fmt.Fprintf(w, "Found %d empty block(s) without an owner: %s\n", len(cr.EmptyUnaffineBlocks), joinOr(cr.EmptyUnaffineBlocks))
	fmt.Fprintf(w, "Found %d handle(s) no allocation uses: %s\n", len(cr.OrphanHandles), joinOr(cr.OrphanHandles))
	fmt.Fprintf(w, "Found %d inconsistenc(ies)%s\n", len(cr.Inconsistencies), listEnd(len(cr.Inconsistencies)))
	for _, s := range cr.Inconsistencies {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "Found %d overlapping block problem(s)%s\n", len(cr.OverlappingBlocks), listEnd(len(cr.OverlappingBlocks)))
	for _, s := range cr.OverlappingBlocks {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "Found %d block(s) outside every IP pool%s\n", len(cr.BlocksOutsidePools), listEnd(len(cr.BlocksOutsidePools)))
	for _, s := range cr.BlocksOutsidePools {
		fmt.Fprintf(w, "  %s\n", s)
	}
	n := len(cr.Leaks) + len(cr.DeadNodes) + len(cr.EmptyUnaffineBlocks) + len(cr.OrphanHandles) + len(cr.Inconsistencies) + len(cr.OverlappingBlocks) + len(cr.BlocksOutsidePools)
	fmt.Fprintf(w, "Check complete; found %d problem(s).\n", n)
}

// listEnd ends a "Found N ..." line: a colon when a list follows.
func listEnd(n int) string {
	if n > 0 {
		return ":"
	}
	return "."
}

// consistency lists what ipam.Check reads and runs it.
func consistency(ctx context.Context, c datastore.Client) (ipam.Findings, error) {
	var in ipam.CheckInput
	for _, l := range []struct {
		kind string
		into **datastore.List
	}{
		{v3.KindIPAMBlock, &in.Blocks},
		{v3.KindIPAMHandle, &in.Handles},
		{v3.KindWorkloadEndpoint, &in.Endpoints},
		{v3.KindIPPool, &in.Pools},
	} {
		got, err := c.List(ctx, l.kind, datastore.ListOptions{})
		if err != nil {
			return ipam.Findings{}, fmt.Errorf("listing %ss: %w", l.kind, friendly(err))
		}
		*l.into = got
	}
	return ipam.Check(in), nil
}
