package commands

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"net/netip"
	"strconv"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func newIPAMSplitCmd(a *app) *cobra.Command {
	var cidr, name string
	cmd := &cobra.Command{
		Use:   "split NUMBER (--name=POOL | --cidr=CIDR)",
		Short: "Split an IP pool into the specified number of smaller IP pools",
		Long: `Split an IP pool into NUMBER (a power of two) pools of equal size, named
split-<pool>-<i>, with the pool's settings; the pool itself is removed. Its
blocks and allocations stay, now inside the new pools. The datastore must be
locked (calicoctl datastore migrate lock) while this runs.`,
		Example: `  calicoctl datastore migrate lock
  calicoctl ipam split 4 --name my-pool
  calicoctl datastore migrate unlock`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[0])
			if err != nil {
				return fmt.Errorf("error reading number to split IP pools into. %s is not a valid number: %v", args[0], err)
			}
			return a.splitPool(cmdContext(cmd), cidr, name, n)
		},
	}
	cmd.Flags().StringVar(&cidr, "cidr", "", "CIDR of the IP pool to split.")
	cmd.Flags().StringVar(&name, "name", "", "Name of the IP pool to split.")
	return cmd
}

// splitCIDR cuts cidr into parts (a power of two) equal CIDRs, in order.
func splitCIDR(cidr string, parts int) ([]netip.Prefix, error) {
	if parts < 2 || bits.OnesCount(uint(parts)) != 1 {
		return nil, fmt.Errorf("number to split CIDR into is not a valid power of 2: %d", parts)
	}
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return nil, fmt.Errorf("error reading CIDR %s before attempting to split it", cidr)
	}
	p = p.Masked()
	power := bits.TrailingZeros(uint(parts))
	if p.Bits()+power > p.Addr().BitLen() {
		return nil, fmt.Errorf("the CIDR %s is not large enough to be split into %d parts", cidr, parts)
	}
	newBits := p.Bits() + power
	step := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-newBits))
	cur := new(big.Int).SetBytes(p.Addr().AsSlice())
	out := make([]netip.Prefix, parts)
	for i := range out {
		b := cur.FillBytes(make([]byte, p.Addr().BitLen()/8))
		addr, _ := netip.AddrFromSlice(b)
		out[i] = netip.PrefixFrom(addr, newBits)
		cur.Add(cur, step)
	}
	return out, nil
}

// splitPool is Calico's ipam split. Calico writes the new pools past its
// overlap check, next to the old one; Tabby's datastore refuses
// overlapping pools outright, so the old pool is deleted first and, should
// a new pool fail, the ones made are deleted and the old one restored.
func (a *app) splitPool(ctx context.Context, cidr, name string, parts int) error {
	if cidr == "" && name == "" {
		return fmt.Errorf("no name or CIDR provided. Provide a name or CIDR to denote the IP pool to split")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	locked, err := checkLocked(ctx, c)
	if err != nil {
		return fmt.Errorf("error while checking if datastore was locked: %w", err)
	}
	if !locked {
		return fmt.Errorf("datastore is not locked. Run the `calicoctl datastore migrate lock` command in order split the IP pools")
	}
	var old *v3.IPPool
	if name != "" {
		r, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: name})
		if err != nil {
			return fmt.Errorf("unable to find IP pool with name %s: %w", name, a.friendly(err))
		}
		old = r.(*v3.IPPool)
	} else {
		l, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{})
		if err != nil {
			return fmt.Errorf("unable to list IP pools to find the pool specified by %s", cidr)
		}
		for _, r := range l.Items {
			if p := r.(*v3.IPPool); p.Spec.CIDR == cidr {
				old = p
			}
		}
	}
	if old == nil {
		return fmt.Errorf("unable to find IP pool %s covering the specified CIDR %s", name, cidr)
	}
	cidrs, err := splitCIDR(old.Spec.CIDR, parts)
	if err != nil {
		return fmt.Errorf("error splitting the CIDR %s into %d CIDRs: %w", old.Spec.CIDR, parts, err)
	}
	// Every new pool is built and validated before anything changes.
	var split []*v3.IPPool
	for i, p := range cidrs {
		n := fmt.Sprintf("split-%s-%d", old.Name, i)
		if len(n) > 253 {
			n = fmt.Sprintf("split-%s-%d", old.Name[:245], i)
		}
		np := &v3.IPPool{TypeMeta: old.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: n, Labels: old.Labels, Annotations: old.Annotations}}
		np.Spec = *old.Spec.DeepCopy()
		np.Spec.CIDR, np.Spec.Disabled = p.String(), false
		if err := v3.DefaultAndValidate(np.DeepCopyObject().(v3.Resource)); err != nil {
			return fmt.Errorf("error splitting the CIDR %s into %d CIDRs: %s: %w", old.Spec.CIDR, parts, p, err)
		}
		split = append(split, np)
	}
	restore := old.DeepCopy()
	old.Spec.Disabled = true
	upd, err := c.Update(ctx, old)
	if err != nil {
		return fmt.Errorf("error disabling IP pool %s: %w", old.Spec.CIDR, a.friendly(err))
	}
	if _, err := c.Delete(ctx, datastore.KeyOf(old), datastore.DeleteOptions{ResourceVersion: upd.GetResourceVersion()}); err != nil {
		return fmt.Errorf("error removing the IP pool that was split %s: %w", old.Name, a.friendly(err))
	}
	for i, np := range split {
		if _, err := c.Create(ctx, np); err != nil {
			return errors.Join(fmt.Errorf("error creating split pool with cidr %s: %w", np.Spec.CIDR, a.friendly(err)),
				undoSplit(ctx, c, split[:i], restore))
		}
	}
	fmt.Fprintf(a.stdout, "IP Pool %s was successfully split into %d smaller pools.\n", old.Name, parts)
	for _, np := range split {
		fmt.Fprintf(a.stdout, "Created %s with CIDR %s.\n", np.Name, np.Spec.CIDR)
	}
	fmt.Fprintln(a.stdout, "Please refer to the documentation for final steps.")
	return nil
}

// undoSplit removes the pools a failed split made and puts the old pool
// back as it was.
func undoSplit(ctx context.Context, c datastore.Client, made []*v3.IPPool, old *v3.IPPool) error {
	var errs []error
	for _, p := range made {
		if _, err := c.Delete(ctx, datastore.KeyOf(p), datastore.DeleteOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("removing split pool %s: %w", p.Name, err))
		}
	}
	old.ResourceVersion, old.UID = "", ""
	if _, err := c.Create(ctx, old); err != nil {
		errs = append(errs, fmt.Errorf("restoring IP pool %s (re-create it from: calicoctl get ippool -o yaml before the split): %w", old.Name, err))
	}
	if len(errs) == 0 {
		return errors.New("the split was undone: the IP pool is as it was")
	}
	return errors.Join(errs...)
}
