package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
				return fmt.Errorf("checking IPAM: %w", friendly(err))
			}
			incons, overlaps, err := inconsistencies(ctx, c)
			if err != nil {
				return err
			}
			cr := toCheckReport(rep, incons)
			cr.Version = a.clientVersion()
			cr.OverlappingBlocks = overlaps
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

func toCheckReport(rep *ipam.GCReport, incons []string) *checkReport {
	cr := &checkReport{
		Kind: reportKind, Version: Version, GraceSeconds: rep.Grace.Seconds(),
		Allocations: rep.Allocations, Unowned: rep.Unowned,
		Leaks: slices.Clone(rep.Leaks), DeadNodes: rep.DeadNodes, OrphanHandles: rep.OrphanHandles,
		Inconsistencies: incons,
	}
	slices.SortFunc(cr.Leaks, func(x, y ipam.Leak) int { return x.IP.Compare(y.IP) })
	for _, p := range rep.EmptyUnaffineBlocks {
		cr.EmptyUnaffineBlocks = append(cr.EmptyUnaffineBlocks, p.String())
	}
	slices.Sort(cr.EmptyUnaffineBlocks)
	for _, s := range []*[]string{&cr.DeadNodes, &cr.EmptyUnaffineBlocks, &cr.OrphanHandles, &cr.Inconsistencies, &cr.OverlappingBlocks} {
		if *s == nil {
			*s = []string{}
		}
	}
	if cr.Leaks == nil {
		cr.Leaks = []ipam.Leak{}
	}
	return cr
}

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
	if cr.OverlappingBlocks == nil {
		cr.OverlappingBlocks = []string{}
	}
	fmt.Fprintf(w, "Found %d overlapping block problem(s)%s\n", len(cr.OverlappingBlocks), listEnd(len(cr.OverlappingBlocks)))
	for _, s := range cr.OverlappingBlocks {
		fmt.Fprintf(w, "  %s\n", s)
	}
	n := len(cr.Leaks) + len(cr.DeadNodes) + len(cr.EmptyUnaffineBlocks) + len(cr.OrphanHandles) + len(cr.Inconsistencies) + len(cr.OverlappingBlocks)
	fmt.Fprintf(w, "Check complete; found %d problem(s).\n", n)
}

// undecodable describes the records a list left out because they cannot
// be decoded: what they hold is unknown to every check.
func undecodable(l *datastore.List) []string {
	var out []string
	for _, b := range l.Bad {
		out = append(out, b.Error())
	}
	return out
}

// listEnd ends a "Found N ..." line: a colon when a list follows.
func listEnd(n int) string {
	if n > 0 {
		return ":"
	}
	return "."
}

// inconsistencies checks the bookkeeping the leak check takes for granted:
// each block's own structure, handles' per-block counts against the
// blocks, and endpoints' addresses against IPAM; and, separately, blocks
// that overlap (ipam.CheckOverlaps).
func inconsistencies(ctx context.Context, c datastore.Client) (_, overlaps []string, _ error) {
	var out []string
	bl, err := c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing IPAM blocks: %w", friendly(err))
	}
	out = append(out, undecodable(bl)...)
	counts := map[string]map[string]int{} // handle -> block -> allocations
	allocated := map[netip.Addr]bool{}
	blocks := make([]*v3.IPAMBlock, 0, len(bl.Items))
	for _, r := range bl.Items {
		b := r.(*v3.IPAMBlock)
		blocks = append(blocks, b)
		out = append(out, ipam.CheckBlock(b)...)
		cidr, err := ipam.BlockCIDR(b)
		if err != nil {
			continue
		}
		for _, al := range ipam.Allocations(b) {
			allocated[al.IP] = true
			if counts[al.Handle] == nil {
				counts[al.Handle] = map[string]int{}
			}
			counts[al.Handle][cidr.String()]++
		}
	}
	hl, err := c.List(ctx, v3.KindIPAMHandle, datastore.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing IPAM handles: %w", friendly(err))
	}
	out = append(out, undecodable(hl)...)
	seen := map[string]bool{}
	for _, r := range hl.Items {
		h := r.(*v3.IPAMHandle)
		seen[h.Spec.HandleID] = true
		got := counts[h.Spec.HandleID]
		if len(got) == 0 {
			continue // an orphan handle: reported by the leak check
		}
		for blk, n := range h.Spec.Block {
			if n != 0 && got[blk] != n {
				out = append(out, fmt.Sprintf("handle %s records %d address(es) in block %s, the block holds %d", h.Spec.HandleID, n, blk, got[blk]))
			}
		}
		for blk, n := range got {
			if _, ok := h.Spec.Block[blk]; !ok {
				out = append(out, fmt.Sprintf("handle %s does not record block %s, which holds %d of its address(es)", h.Spec.HandleID, blk, n))
			}
		}
	}
	for h := range counts {
		if h != "" && !seen[h] {
			out = append(out, fmt.Sprintf("handle %s is used by allocations but has no IPAMHandle", h))
		}
	}
	wl, err := c.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing workload endpoints: %w", friendly(err))
	}
	pl, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing IP pools: %w", friendly(err))
	}
	out = append(out, undecodable(wl)...)
	out = append(out, undecodable(pl)...)
	var ps []v3.IPPool
	for _, r := range pl.Items {
		ps = append(ps, *r.(*v3.IPPool))
	}
	pools := ipam.ParsePools(ps)
	for _, r := range wl.Items {
		w := r.(*v3.WorkloadEndpoint)
		for _, n := range w.Spec.IPNetworks {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				continue
			}
			ip := p.Addr().Unmap()
			if _, inPool := ipam.PoolFor(pools, ip); inPool && !allocated[ip] {
				out = append(out, fmt.Sprintf("workload endpoint %s/%s uses %s, which IPAM has not allocated", w.Namespace, w.Name, ip))
			}
		}
	}
	slices.Sort(out)
	return out, append(poolOverlapFindings(ps), ipam.CheckOverlaps(blocks)...), nil
}

// poolOverlapFindings names stored pools that overlap each other (written
// past the datastore's check, or created at the same moment): the cause of
// overlapping blocks.
func poolOverlapFindings(ps []v3.IPPool) []string {
	var out []string
	var seen []*v3.IPPool
	for i := range ps {
		for _, fe := range v3.IPPoolOverlapErrors(&ps[i], seen) {
			out = append(out, fe.Msg)
		}
		seen = append(seen, &ps[i])
	}
	return out
}

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
		return fmt.Errorf("some releases failed (run ipam check again and retry): %w", friendly(err))
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
			return fmt.Errorf("releasing: %w", friendly(err))
		}
		if len(got) < len(addrs) {
			return fmt.Errorf("released %d of %d address(es): the others were not assigned", len(got), len(addrs))
		}
		return nil
	}
	rep, err := al.CheckLeaks(ctx, 0)
	if err != nil {
		return fmt.Errorf("checking the addresses: %w", friendly(err))
	}
	byIP := map[netip.Addr]ipam.Leak{}
	for _, l := range rep.Leaks {
		byIP[l.IP] = l
	}
	allocs, err := al.ListAllocations(ctx, func(x ipam.Allocated) bool { return slices.Contains(addrs, x.IP) })
	if err != nil {
		return fmt.Errorf("checking the addresses: %w", friendly(err))
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
		problems = append(problems, friendly(err).Error())
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func newIPAMConfigureCmd(a *app) *cobra.Command {
	var (
		strict      bool
		maxBlocks   int32
		persistence string
		cooldown    int
	)
	cmd := &cobra.Command{
		Use:   "configure --strictaffinity=true|false [--max-blocks-per-host=N]",
		Short: "Change the cluster's IPAM settings (IPAMConfiguration default)",
		Example: `  calicoctl ipam configure --strictaffinity=true
  calicoctl ipam configure --max-blocks-per-host=4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			setStrict := cmd.Flags().Changed("strictaffinity")
			setMax := cmd.Flags().Changed("max-blocks-per-host")
			setPersistence := cmd.Flags().Changed("kubevirt-ip-persistence")
			setCooldown := cmd.Flags().Changed("ip-cooldown-seconds")
			// Tabby's IPAM has neither KubeVirt address persistence nor IP
			// cooldown: only the values that change nothing are accepted.
			if setPersistence {
				switch persistence {
				case "Enabled":
				case "Disabled":
					return fmt.Errorf("--kubevirt-ip-persistence=Disabled is not supported by Tabby: its IPAM has no KubeVirt handling (leave it Enabled, the default)")
				default:
					return fmt.Errorf("invalid value for --kubevirt-ip-persistence. Use Enabled or Disabled")
				}
			}
			if setCooldown && cooldown != 0 {
				return fmt.Errorf("--ip-cooldown-seconds=%d is not supported by Tabby: its IPAM hands a released address out again at once (0 is the only value)", cooldown)
			}
			if !setStrict && !setMax && !setPersistence && !setCooldown {
				return fmt.Errorf("nothing to change: pass --strictaffinity=true|false and/or --max-blocks-per-host=N")
			}
			if maxBlocks < 0 || maxBlocks > 1000000 {
				return fmt.Errorf("--max-blocks-per-host=%d is out of range: give 0 (no limit) to 1000000", maxBlocks)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmdContext(cmd)
			err = updateIPAMConfig(ctx, c, func(s *v3.IPAMConfigurationSpec) {
				if setStrict {
					s.StrictAffinity = strict
				}
				if setMax {
					s.MaxBlocksPerHost = maxBlocks
				}
				if setPersistence {
					s.KubeVirtVMAddressPersistence = nil // unset means Enabled
				}
				if setCooldown {
					s.IPCooldownSeconds = 0
				}
			})
			if err != nil {
				return err
			}
			if setStrict {
				fmt.Fprintf(a.stdout, "Successfully set StrictAffinity to: %t\n", strict)
			}
			if setMax {
				fmt.Fprintf(a.stdout, "Successfully set MaxBlocksPerHost to: %d\n", maxBlocks)
			}
			if setPersistence {
				fmt.Fprintln(a.stdout, "Successfully set KubeVirtVMAddressPersistence to:", persistence)
			}
			if setCooldown {
				fmt.Fprintln(a.stdout, "Successfully set IPCooldownSeconds to:", cooldown)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strictaffinity", false, "true: nodes never borrow addresses from other nodes' blocks")
	cmd.Flags().Int32Var(&maxBlocks, "max-blocks-per-host", 0, "most blocks one node may claim (0: no limit)")
	cmd.Flags().StringVar(&persistence, "kubevirt-ip-persistence", "", "Control whether KubeVirt VMs retain persistent IP addresses (Enabled|Disabled); Tabby: Enabled only.")
	cmd.Flags().IntVar(&cooldown, "ip-cooldown-seconds", -1, "Set the minimum time between release and re-allocation of an IP address; Tabby: 0 only.")
	return cmd
}

// updateIPAMConfig creates or changes IPAMConfiguration default with a
// compare-and-swap, retrying lost races.
func updateIPAMConfig(ctx context.Context, c datastore.Client, change func(*v3.IPAMConfigurationSpec)) error {
	key := datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"}
	for attempt := 0; attempt < 5; attempt++ {
		r, err := c.Get(ctx, key)
		if isNotFound(err) {
			info, _ := v3.LookupKind(v3.KindIPAMConfiguration)
			cfg := info.New().(*v3.IPAMConfiguration)
			cfg.Name = "default"
			cfg.Default()
			change(&cfg.Spec)
			if _, err = c.Create(ctx, cfg); errors.Is(err, datastore.ErrAlreadyExists) {
				continue
			}
		} else if err == nil {
			cfg := r.(*v3.IPAMConfiguration)
			change(&cfg.Spec)
			if _, err = c.Update(ctx, cfg); errors.Is(err, datastore.ErrConflict) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("writing IPAMConfiguration default: %w", friendly(err))
		}
		return nil
	}
	return fmt.Errorf("writing IPAMConfiguration default: %w", friendly(datastore.ErrConflict))
}
