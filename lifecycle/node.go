// Package lifecycle deletes the resources whose deletion means more than
// removing their record, as Calico's clientv3 does: a Node takes its
// addresses, block affinities, endpoints, BGP peers and per-node
// configuration with it; an IPPool is disabled and gives back its block
// affinities and empty blocks before it goes. calicoctl's delete and
// kube-controllers' node controller both delete through here, so there is
// one path for each.
//
// The plan of a node deletion (what to release and delete) is a pure
// function of the listed resources (PlanNode); DeleteNode reads, plans and
// applies it over a datastore.Client. Writes a datastore refuses as
// read-only (the Kubernetes datastore's pod-derived WorkloadEndpoints) are
// skipped, as Calico skips what its datastore does not support.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// Deleter deletes over one datastore client. The zero Logger and Settle
// are defaults; a Deleter is safe for concurrent use.
type Deleter struct {
	Client datastore.Client
	// Logger [default slog.Default()].
	Logger *slog.Logger
	// Settle is the pause between disabling a pool and releasing its
	// blocks, for allocations under way to finish [default 500 ms,
	// Calico's; negative: none].
	Settle time.Duration
}

func (d Deleter) log() *slog.Logger {
	if d.Logger == nil {
		return slog.Default()
	}
	return d.Logger
}

// Delete deletes the resource k names: a Node with DeleteNode, an IPPool
// with DeletePool, anything else with the client's Delete.
func (d Deleter) Delete(ctx context.Context, k datastore.Key, opts datastore.DeleteOptions) (v3.Resource, error) {
	switch k.Kind {
	case v3.KindNode:
		return d.DeleteNode(ctx, k.Name, opts)
	case v3.KindIPPool:
		return d.DeletePool(ctx, k.Name, opts)
	}
	return d.Client.Delete(ctx, k, opts)
}

// NodePlan is what deleting a node takes besides its record.
type NodePlan struct {
	// Addresses to release: the endpoints' and the node's tunnel and
	// WireGuard addresses.
	Addresses []netip.Addr
	// Delete are the records to delete, in Calico's order: the node's
	// WorkloadEndpoints, the BGPPeers scoped to it (spec.node), its
	// node.<name> FelixConfiguration and BGPConfiguration, and its
	// HostEndpoints.
	Delete []datastore.Key
	// Unparsed are addresses that could not be read: logged by
	// DeleteNode (Calico logs and goes on), never silently dropped.
	Unparsed []string
}

// NodeInputs are the records PlanNode reads.
type NodeInputs struct {
	Node          *v3.Node // nil when the record is gone already
	Endpoints     []v3.Resource
	Peers         []v3.Resource
	HostEndpoints []v3.Resource
}

// PlanNode is the pure core of a node deletion, as Calico's
// nodes.Delete: the addresses of the node's endpoints (spec.node, not the
// name prefix, which another node's name may share) and of the node
// itself, then the endpoints, BGP peers with spec.node, host endpoints and
// per-node configurations to delete. Calico releases only the IPv4 tunnel
// and WireGuard addresses; the IPv6 ones are released too, so nothing of
// the node is left for the garbage collector.
func PlanNode(name string, in NodeInputs) NodePlan {
	var p NodePlan
	addAddr := func(s string) {
		if s == "" {
			return
		}
		if a, err := netip.ParseAddr(s); err == nil {
			p.Addresses = append(p.Addresses, a.Unmap())
		} else if pr, err := netip.ParsePrefix(s); err == nil {
			p.Addresses = append(p.Addresses, pr.Addr().Unmap())
		} else {
			p.Unparsed = append(p.Unparsed, s)
		}
	}
	var weps []datastore.Key
	for _, r := range in.Endpoints {
		w := r.(*v3.WorkloadEndpoint)
		if w.Spec.Node != name {
			continue
		}
		for _, n := range w.Spec.IPNetworks {
			addAddr(n)
		}
		weps = append(weps, datastore.KeyOf(w))
	}
	if n := in.Node; n != nil {
		if n.Spec.BGP != nil {
			addAddr(n.Spec.BGP.IPv4IPIPTunnelAddr)
		}
		addAddr(n.Spec.IPv4VXLANTunnelAddr)
		addAddr(n.Spec.IPv6VXLANTunnelAddr)
		if wg := n.Spec.Wireguard; wg != nil {
			addAddr(wg.InterfaceIPv4Address)
			addAddr(wg.InterfaceIPv6Address)
		}
	}
	p.Delete = append(p.Delete, weps...)
	for _, r := range in.Peers {
		if r.(*v3.BGPPeer).Spec.Node == name {
			p.Delete = append(p.Delete, datastore.KeyOf(r))
		}
	}
	p.Delete = append(p.Delete,
		datastore.Key{Kind: v3.KindFelixConfiguration, Name: "node." + name},
		datastore.Key{Kind: v3.KindBGPConfiguration, Name: "node." + name})
	for _, r := range in.HostEndpoints {
		if r.(*v3.HostEndpoint).Spec.Node == name {
			p.Delete = append(p.Delete, datastore.KeyOf(r))
		}
	}
	slices.SortStableFunc(p.Addresses, func(a, b netip.Addr) int { return a.Compare(b) })
	p.Addresses = slices.Compact(p.Addresses)
	return p
}

// DeleteNode deletes a node as Calico's does: it releases the addresses of
// the node's WorkloadEndpoints and the node's own (tunnel, WireGuard)
// addresses (and, beyond Calico, every other allocation recorded as the
// node's, so that no leak of it is left for the garbage collector), deletes the endpoints, releases every block affinity of the
// node (empty blocks deleted, the others un-affined), deletes the BGPPeers
// scoped to it, its HostEndpoints and its node.<name> FelixConfiguration
// and BGPConfiguration, and finally the Node record (with opts'
// preconditions). A node whose record is gone already is still cleaned up
// after, and then reported as not found. Records already gone, and
// writes the datastore refuses as read-only, are skipped.
func (d Deleter) DeleteNode(ctx context.Context, name string, opts datastore.DeleteOptions) (v3.Resource, error) {
	c := d.Client
	in, exists, err := readNode(ctx, c, name)
	if err != nil {
		return nil, err
	}
	plan := PlanNode(name, in)
	for _, s := range plan.Unparsed {
		d.log().Warn("deleting node: an address of it cannot be read, so it is not released (calicoctl ipam check reports it once the node is gone)", "node", name, "address", s)
	}
	if err := d.applyNode(ctx, name, plan); err != nil {
		return nil, err
	}
	key := datastore.Key{Kind: v3.KindNode, Name: name}
	if !exists {
		return nil, fmt.Errorf("node %s: %w", name, datastore.ErrNotFound)
	}
	return c.Delete(ctx, key, opts)
}

// readNode reads the records PlanNode needs.
func readNode(ctx context.Context, c datastore.Client, name string) (NodeInputs, bool, error) {
	var in NodeInputs
	exists := true
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: name})
	switch {
	case err == nil:
		in.Node = r.(*v3.Node)
	case errors.Is(err, datastore.ErrNotFound):
		exists = false
	case errors.Is(err, datastore.ErrUndecodable):
		// A damaged record is still deleted; its own addresses are
		// unknown, but IPAM's record of them (AttrNode) is not.
	default:
		return in, false, fmt.Errorf("reading node %s: %w", name, err)
	}
	for _, l := range []struct {
		kind string
		into *[]v3.Resource
	}{
		{v3.KindWorkloadEndpoint, &in.Endpoints},
		{v3.KindBGPPeer, &in.Peers},
		{v3.KindHostEndpoint, &in.HostEndpoints},
	} {
		got, err := c.List(ctx, l.kind, datastore.ListOptions{})
		if err == nil {
			err = got.Complete()
		}
		if err != nil {
			return in, false, fmt.Errorf("deleting node %s: listing %ss: %w", name, l.kind, err)
		}
		*l.into = got.Items
	}
	return in, exists, nil
}

// applyNode carries out a node's plan: addresses first (while their
// endpoints still say whose they are), then the records, with the block
// affinities released between the endpoints and the rest, in Calico's
// order.
func (d Deleter) applyNode(ctx context.Context, name string, plan NodePlan) error {
	c := d.Client
	al := ipam.New(c, ipam.Config{Logger: d.log()})
	// Beyond Calico (which leaves them to the garbage collector): every
	// address IPAM records as the node's, such as a pod's whose endpoint
	// is gone already.
	held, err := al.ListAllocations(ctx, func(x ipam.Allocated) bool { return x.Attrs[ipam.AttrNode] == name })
	if err != nil {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	addrs := slices.Clone(plan.Addresses)
	for _, x := range held {
		if !slices.Contains(addrs, x.IP) {
			addrs = append(addrs, x.IP)
		}
	}
	if err := releaseAll(ctx, al, addrs); err != nil {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	affinitiesDone := false
	for _, k := range plan.Delete {
		if !affinitiesDone && k.Kind != v3.KindWorkloadEndpoint {
			if _, err := al.ReleaseNodeBlocks(ctx, name); err != nil {
				return fmt.Errorf("deleting node %s: releasing its blocks: %w", name, err)
			}
			affinitiesDone = true
		}
		if err := deleteIfThere(ctx, c, k); err != nil {
			return fmt.Errorf("deleting node %s: %w", name, err)
		}
	}
	return nil
}

// releaseAll releases addrs, in one pass when every one is in a pool or
// block; otherwise one by one, skipping those that are in none (nothing
// to release, as in Calico).
func releaseAll(ctx context.Context, al *ipam.Allocator, addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return nil
	}
	_, err := al.ReleaseIPs(ctx, addrs...)
	if !errors.Is(err, ipam.ErrNotInPool) {
		return err
	}
	for _, ip := range addrs {
		if _, err := al.ReleaseIPs(ctx, ip); err != nil && !errors.Is(err, ipam.ErrNotInPool) {
			return fmt.Errorf("releasing %s: %w", ip, err)
		}
	}
	return nil
}

// deleteIfThere deletes k; gone already, or read-only in this datastore
// (Calico's "operation not supported"), is not an error.
func deleteIfThere(ctx context.Context, c datastore.Client, k datastore.Key) error {
	_, err := c.Delete(ctx, k, datastore.DeleteOptions{})
	if err == nil || errors.Is(err, datastore.ErrNotFound) || errors.Is(err, datastore.ErrReadOnly) {
		return nil
	}
	return fmt.Errorf("deleting %s: %w", k, err)
}
