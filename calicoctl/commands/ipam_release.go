package commands

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

func newIPAMReleaseCmd(a *app) *cobra.Command {
	var (
		ips        []string
		fromReport []string
		force      bool
		grace      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "release (--ip=ADDR... | --from-report=FILE)",
		Short: "Free leaked addresses, re-checking each one first",
		Long: `Free addresses whose owner is gone. Each address is checked again just
before it is freed: an address whose pod or node exists again, or that was
freed and handed to someone else since, is left alone. --from-report frees
what ipam check -o reported (leaks, and the blocks of deleted nodes);
--ip frees single addresses, and refuses one whose owner still exists
unless --force is given.`,
		Example: `  calicoctl ipam check -o report.json
  calicoctl ipam release --from-report=report.json
  calicoctl ipam release --ip=10.244.0.5
  calicoctl ipam release --ip=10.244.0.5 --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(ips) == 0) == (len(fromReport) == 0) {
				return fmt.Errorf("give exactly one of --ip=ADDR or --from-report=FILE (write a report with calicoctl ipam check -o FILE)")
			}
			var addrs []netip.Addr
			for _, s := range ips {
				ip, err := netip.ParseAddr(s)
				if err != nil {
					return fmt.Errorf("--ip=%q is not an IP address: give one like --ip=10.244.0.5", s)
				}
				addrs = append(addrs, ip.Unmap())
			}
			var files []*reportFile
			for _, path := range fromReport {
				f, err := readReport(path)
				if err != nil {
					return err
				}
				files = append(files, f)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmdContext(cmd)
			al := ipam.New(c, ipam.Config{Logger: a.log()})
			if len(files) > 0 {
				rep, notes, err := releasePlan(ctx, c, al, files)
				if err != nil {
					return err
				}
				for _, n := range notes {
					fmt.Fprintln(a.stdout, n)
				}
				if cmd.Flags().Changed("grace") {
					rep.Grace = grace
				}
				return a.releaseReport(ctx, c, al, rep)
			}
			return a.releaseIPs(ctx, al, addrs, force)
		},
	}
	cmd.Flags().StringSliceVar(&ips, "ip", nil, "address to free (repeatable, or comma-separated)")
	cmd.Flags().StringArrayVar(&fromReport, "from-report", nil, "Release all leaked addresses from the report (Calico's or Tabby's ipam check -o; repeat to release only what every report lists).")
	cmd.Flags().DurationVar(&grace, "grace", defaultGrace, "with --from-report: spare addresses whose handle is younger than this (default: the report's --grace, 1m for Calico's reports)")
	cmd.Flags().BoolVar(&force, "force", false, "with --ip: free the address even if its owner still exists")
	return cmd
}

func readReport(path string) (*reportFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the report: %w (write one with calicoctl ipam check -o FILE)", err)
	}
	return parseReport(path, data)
}

func (a *app) releaseReport(ctx context.Context, c datastore.Client, al *ipam.Allocator, rep *ipam.GCReport) error {
	freed, err := al.ReleaseLeaks(ctx, rep)
	fmt.Fprintf(a.stdout, "Released %d of %d reported leak(s)%s\n", len(freed), len(rep.Leaks), listEnd(len(freed)))
	done := map[netip.Addr]bool{}
	for _, l := range freed {
		done[l.IP] = true
		fmt.Fprintf(a.stdout, "  %s (%s)\n", l.IP, l.Reason)
	}
	var kept []string
	for _, l := range rep.Leaks {
		if !done[l.IP] {
			kept = append(kept, l.IP.String())
		}
	}
	if len(kept) > 0 {
		fmt.Fprintf(a.stdout, "Left alone (no longer leaked, or failed): %s\n", strings.Join(kept, ", "))
	}
	if len(rep.DeadNodes) > 0 {
		// ReleaseLeaks skips a node that is back; say which still hold blocks.
		holding, lerr := nodesHoldingBlocks(ctx, c, rep.DeadNodes)
		if lerr != nil {
			err = errors.Join(err, lerr)
		}
		fmt.Fprintf(a.stdout, "Released the blocks of deleted node(s) %s; still holding blocks: %s\n", strings.Join(rep.DeadNodes, ", "), joinOr(holding))
	}
	if n := len(rep.EmptyUnaffineBlocks) + len(rep.OrphanHandles); n > 0 {
		fmt.Fprintf(a.stdout, "Re-checked and cleaned %d empty block(s) and %d unused handle(s).\n", len(rep.EmptyUnaffineBlocks), len(rep.OrphanHandles))
	}
	if err != nil {
		return fmt.Errorf("some releases failed (run ipam check again and retry): %w", a.friendly(err))
	}
	return nil
}

// nodesHoldingBlocks returns which of nodes still have block affinities.
func nodesHoldingBlocks(ctx context.Context, c datastore.Client, nodes []string) ([]string, error) {
	l, err := c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing block affinities: %w", err)
	}
	var out []string
	for _, r := range l.Items {
		n := r.(*v3.BlockAffinity).Spec.Node
		if slices.Contains(nodes, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// releaseIPs frees single addresses. Without force each must be a leak
// (its owner gone) now; ReleaseLeaks then re-checks it once more and frees
// it only if it still carries the same handle and sequence number.
func (a *app) releaseIPs(ctx context.Context, al *ipam.Allocator, addrs []netip.Addr, force bool) error {
	if force {
		got, err := al.ReleaseIPs(ctx, addrs...)
		for _, ip := range got {
			fmt.Fprintf(a.stdout, "Released %s\n", ip)
		}
		if err != nil {
			return fmt.Errorf("releasing: %w", a.friendly(err))
		}
		if len(got) < len(addrs) {
			return fmt.Errorf("released %d of %d address(es): the others were not assigned", len(got), len(addrs))
		}
		return nil
	}
	rep, err := al.CheckLeaks(ctx, 0)
	if err != nil {
		return fmt.Errorf("checking the addresses: %w", a.friendly(err))
	}
	byIP := map[netip.Addr]ipam.Leak{}
	for _, l := range rep.Leaks {
		byIP[l.IP] = l
	}
	allocs, err := al.ListAllocations(ctx, func(x ipam.Allocated) bool { return slices.Contains(addrs, x.IP) })
	if err != nil {
		return fmt.Errorf("checking the addresses: %w", a.friendly(err))
	}
	assigned := map[netip.Addr]bool{}
	for _, x := range allocs {
		assigned[x.IP] = true
	}
	var problems []string
	var leaks []ipam.Leak
	for _, ip := range addrs {
		l, ok := byIP[ip]
		switch {
		case !assigned[ip]:
			problems = append(problems, fmt.Sprintf("%s is not assigned: nothing to release", ip))
		case !ok:
			problems = append(problems, fmt.Sprintf("%s is in use by a live owner (see calicoctl ipam show --ip=%s); add --force to release it anyway", ip, ip))
		default:
			leaks = append(leaks, l)
		}
	}
	freed, err := al.ReleaseLeaks(ctx, &ipam.GCReport{Leaks: leaks})
	for _, l := range freed {
		fmt.Fprintf(a.stdout, "Released %s (%s)\n", l.IP, l.Reason)
	}
	if len(freed) < len(leaks) {
		problems = append(problems, fmt.Sprintf("%d address(es) changed owner while releasing and were left alone", len(leaks)-len(freed)))
	}
	if err != nil {
		problems = append(problems, a.friendly(err).Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
