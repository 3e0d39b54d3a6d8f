package commands

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// ipamState is everything ipam show reads, in one pass.
type ipamState struct {
	pools  []ipam.Pool
	blocks []*v3.IPAMBlock // sorted by CIDR
}

func loadIPAMState(ctx context.Context, c datastore.Client) (*ipamState, error) {
	pl, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing IP pools: %w", friendly(err))
	}
	var pools []v3.IPPool
	for _, r := range pl.Items {
		pools = append(pools, *r.(*v3.IPPool))
	}
	bl, err := c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing IPAM blocks: %w", friendly(err))
	}
	st := &ipamState{pools: ipam.ParsePools(pools)}
	for _, r := range bl.Items {
		b := r.(*v3.IPAMBlock)
		if _, err := ipam.BlockCIDR(b); err == nil {
			st.blocks = append(st.blocks, b)
		}
	}
	slices.SortFunc(st.blocks, func(x, y *v3.IPAMBlock) int {
		px, _ := ipam.BlockCIDR(x)
		py, _ := ipam.BlockCIDR(y)
		if c := px.Addr().Compare(py.Addr()); c != 0 {
			return c
		}
		return px.Bits() - py.Bits()
	})
	return st, nil
}

func inUse(b *v3.IPAMBlock) int {
	n := 0
	for _, a := range b.Spec.Allocations {
		if a != nil {
			n++
		}
	}
	return n
}

// prefixSize is the number of addresses in p (up to 2^128).
func prefixSize(p netip.Prefix) *big.Int {
	return new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
}

// usageCells formats "used (pct%)" and "free (pct%)" as Calico does.
func usageCells(total *big.Int, used int64) (string, string) {
	u := big.NewInt(used)
	free := new(big.Int).Sub(total, u)
	pct := func(n *big.Int) string {
		if total.Sign() == 0 {
			return "0%"
		}
		f, _ := new(big.Float).Quo(new(big.Float).Mul(new(big.Float).SetInt(n), big.NewFloat(100)), new(big.Float).SetInt(total)).Float64()
		return strconv.FormatFloat(f, 'f', 0, 64) + "%"
	}
	return fmt.Sprintf("%d (%s)", used, pct(u)), fmt.Sprintf("%s (%s)", free, pct(free))
}

func newIPAMShowCmd(a *app) *cobra.Command {
	var (
		showBlocks, showConfig, showBorrowed bool
		ip                                   string
	)
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show IP pool and block usage, or who holds an address",
		Example: `  calicoctl ipam show
  calicoctl ipam show --show-blocks
  calicoctl ipam show --ip=10.244.0.5
  calicoctl ipam show --show-borrowed
  calicoctl ipam show --show-configuration`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var addr netip.Addr
			if ip != "" {
				var err error
				if addr, err = netip.ParseAddr(ip); err != nil {
					return fmt.Errorf("--ip=%q is not an IP address: give one like --ip=10.244.0.5 or --ip=fd00::5", ip)
				}
				addr = addr.Unmap()
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmdContext(cmd)
			if showConfig {
				return a.showIPAMConfig(ctx, c)
			}
			st, err := loadIPAMState(ctx, c)
			if err != nil {
				return err
			}
			if addr.IsValid() {
				a.showIP(st, addr)
				return nil
			}
			if showBorrowed {
				a.showBorrowed(st)
				return nil
			}
			a.showUsage(st, showBlocks)
			return nil
		},
	}
	cmd.Flags().BoolVar(&showBlocks, "show-blocks", false, "add a row for each IPAM block")
	cmd.Flags().BoolVar(&showConfig, "show-configuration", false, "show the cluster's IPAM settings (IPAMConfiguration default)")
	cmd.Flags().StringVar(&ip, "ip", "", "show who holds this address")
	cmd.Flags().BoolVar(&showBorrowed, "show-borrowed", false, "Show detailed information for borrowed IP addresses.")
	return cmd
}

func (a *app) showUsage(st *ipamState, showBlocks bool) {
	var rows [][]string
	placed := map[*v3.IPAMBlock]bool{}
	pools := slices.Clone(st.pools)
	slices.SortFunc(pools, func(x, y ipam.Pool) int { return x.CIDR.Addr().Compare(y.CIDR.Addr()) })
	for _, p := range pools {
		var used int64
		var blockRows [][]string
		for _, b := range st.blocks {
			cidr, _ := ipam.BlockCIDR(b)
			if !p.CIDR.Overlaps(cidr) || placed[b] {
				continue
			}
			placed[b] = true
			n := int64(inUse(b))
			used += n
			u, f := usageCells(prefixSize(cidr), n)
			blockRows = append(blockRows, []string{"Block", cidr.String(), prefixSize(cidr).String(), u, f})
		}
		u, f := usageCells(prefixSize(p.CIDR), used)
		rows = append(rows, []string{"IP Pool", p.CIDR.String(), prefixSize(p.CIDR).String(), u, f})
		if showBlocks {
			rows = append(rows, blockRows...)
		}
	}
	if showBlocks {
		for _, b := range st.blocks {
			if !placed[b] {
				cidr, _ := ipam.BlockCIDR(b)
				u, f := usageCells(prefixSize(cidr), int64(inUse(b)))
				rows = append(rows, []string{"Block (no pool)", cidr.String(), prefixSize(cidr).String(), u, f})
			}
		}
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "No IP pools: create one with calicoctl apply -f ippool.yaml.")
		return
	}
	boxTable(a.stdout, []string{"GROUPING", "CIDR", "IPS TOTAL", "IPS IN USE", "IPS FREE"}, rows)
}

func (a *app) showIP(st *ipamState, ip netip.Addr) {
	for _, b := range st.blocks {
		cidr, _ := ipam.BlockCIDR(b)
		if !cidr.Contains(ip) {
			continue
		}
		o, _ := ipam.IPToOrdinal(cidr, ip)
		al, ok := ipam.AllocationAt(b, cidr, o)
		if !ok {
			break
		}
		fmt.Fprintf(a.stdout, "IP %s is in use\n", ip)
		fmt.Fprintf(a.stdout, "Handle: %s\n", al.Handle)
		aff := "none"
		if b.Spec.Affinity != nil {
			aff = *b.Spec.Affinity
		}
		fmt.Fprintf(a.stdout, "Block: %s (affinity %s)\n", cidr, aff)
		keys := make([]string, 0, len(al.Attrs))
		for k := range al.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintln(a.stdout, "Attributes:")
		for _, k := range keys {
			fmt.Fprintf(a.stdout, "  %s: %s\n", k, al.Attrs[k])
		}
		return
	}
	msg := fmt.Sprintf("IP %s is not currently assigned", ip)
	if _, ok := ipam.PoolFor(st.pools, ip); !ok {
		msg += " (it is in no IP pool)"
	}
	fmt.Fprintln(a.stdout, msg)
}

func (a *app) showIPAMConfig(ctx context.Context, c datastore.Client) error {
	cfg := &v3.IPAMConfiguration{}
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"})
	switch {
	case err == nil:
		cfg = r.(*v3.IPAMConfiguration)
	case isNotFound(err):
		// Not written yet: Calico's defaults apply.
	default:
		return fmt.Errorf("reading IPAMConfiguration default: %w", a.friendly(err))
	}
	cfg.Default()
	maxBlocks := "0 (no limit)"
	if cfg.Spec.MaxBlocksPerHost != 0 {
		maxBlocks = strconv.Itoa(int(cfg.Spec.MaxBlocksPerHost))
	}
	boxTable(a.stdout, []string{"PROPERTY", "VALUE"}, [][]string{
		{"StrictAffinity", strconv.FormatBool(cfg.Spec.StrictAffinity)},
		{"AutoAllocateBlocks", strconv.FormatBool(*cfg.Spec.AutoAllocateBlocks)},
		{"MaxBlocksPerHost", maxBlocks},
	})
	return nil
}

// joinOr renders a list for a message, "none" when empty.
func joinOr(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// showBorrowed lists, as Calico's --show-borrowed does, every address
// allocated for a node other than its block's owner (or from a block
// without one), and counts those without a node attribute, which cannot
// be classified.
func (a *app) showBorrowed(st *ipamState) {
	var rows [][]string
	unclassified := 0
	for _, b := range st.blocks {
		cidr, _ := ipam.BlockCIDR(b)
		owner := ""
		if b.Spec.Affinity != nil {
			owner = strings.TrimPrefix(*b.Spec.Affinity, "host:")
		}
		for _, al := range ipam.Allocations(b) {
			node, ok := al.Attrs[ipam.AttrNode]
			if !ok {
				unclassified++
				continue
			}
			if node == owner {
				continue
			}
			ns := al.Attrs[ipam.AttrNamespace]
			typ, to := "", ""
			if vmi, ok := al.Attrs["vmi-name"]; ok {
				typ, to = "vmi", ns+"/"+vmi
			} else if pod, ok := al.Attrs[ipam.AttrPod]; ok {
				typ, to = "pod", ns+"/"+pod
			} else {
				typ = al.Attrs[ipam.AttrType]
			}
			rows = append(rows, []string{al.IP.String(), node, cidr.String(), owner, typ, to})
		}
	}
	boxTable(a.stdout, []string{"IP", "BORROWING-NODE", "BLOCK", "BLOCK OWNER", "TYPE", "ALLOCATED-TO"}, rows)
	if unclassified != 0 {
		fmt.Fprintf(a.stdout, "\nNote: found %d IP allocations without an explicit node association. Unable to determine if they are borrowed.\n", unclassified)
	}
}
