package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Leak is an allocation whose owner no longer exists.
type Leak struct {
	IP        netip.Addr
	Block     netip.Prefix
	Handle    string
	Namespace string
	Pod       string
	Node      string
	Seq       uint64 // the allocation's sequence number: a reassigned address is not this leak
	Reason    string
}

// GCReport is what a leak check found. Release frees exactly these after
// re-checking each one.
type GCReport struct {
	// Leaks are allocations whose pod (WorkloadEndpoint) or, for non-pod
	// allocations, node is gone.
	Leaks []Leak
	// DeadNodes are nodes with block affinities but no Node object.
	DeadNodes []string
	// EmptyUnaffineBlocks are blocks without an owner and without
	// addresses (a deleted node's blocks once their pods are gone).
	EmptyUnaffineBlocks []netip.Prefix
	// StaleAffinities are BlockAffinities whose block does not exist or
	// belongs to another node (an interrupted claim or release).
	StaleAffinities []string
	// OrphanHandles are IPAMHandles no allocation refers to (left by a
	// release that failed half way).
	OrphanHandles []string
	// Unowned counts allocations without owner attributes: never released.
	Unowned int
	// Allocations is the number of allocations inspected.
	Allocations int
	// Grace is the minimum handle age the check used; the re-check before
	// releasing uses it too.
	Grace time.Duration
}

// CheckLeaks lists every allocation and reports those whose owner is gone:
// a pod allocation (attributes namespace and pod) whose WorkloadEndpoint no
// longer exists or no longer has the address, or a node allocation (only a
// node attribute) whose Node is gone. It changes nothing.
//
// Allocations whose handle is younger than grace are skipped: a pod being
// set up holds its address before its WorkloadEndpoint is written.
func (a *Allocator) CheckLeaks(ctx context.Context, grace time.Duration) (*GCReport, error) {
	hl, err := a.c.List(ctx, v3.KindIPAMHandle, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing handles: %w", err)
	}
	young := map[string]bool{}
	handles := map[string]bool{}
	now := a.cfg.Now()
	for _, r := range hl.Items {
		id := r.(*v3.IPAMHandle).Spec.HandleID
		handles[id] = true
		if now.Sub(r.GetCreationTimestamp().Time) < grace {
			young[id] = true
		}
	}
	inUse := map[string]bool{}
	// An address is judged leaked from the nodes and endpoints that do
	// not hold it: one that cannot be read could be the holder, so the
	// check refuses to judge rather than report a live address.
	nl, err := a.c.List(ctx, v3.KindNode, datastore.ListOptions{})
	if err == nil {
		err = nl.Complete()
	}
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes := map[string]bool{}
	for _, r := range nl.Items {
		nodes[r.GetName()] = true
	}
	wl, err := a.c.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err == nil {
		err = wl.Complete()
	}
	if err != nil {
		return nil, fmt.Errorf("listing workload endpoints: %w", err)
	}
	pods := podIndex(wl.Items)
	bl, err := a.c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing blocks: %w", err)
	}
	rep := &GCReport{Grace: grace}
	owner := map[netip.Prefix]string{} // block -> its affinity
	for _, r := range bl.Items {
		b := r.(*v3.IPAMBlock)
		cidr, err := BlockCIDR(b)
		if err != nil {
			continue
		}
		if b.Spec.Affinity != nil {
			owner[cidr] = *b.Spec.Affinity
		}
		if b.Spec.Affinity == nil && IsEmpty(b) {
			rep.EmptyUnaffineBlocks = append(rep.EmptyUnaffineBlocks, cidr)
		}
		for _, al := range Allocations(b) {
			inUse[al.Handle] = true
			rep.Allocations++
			l, leaked, owned := judge(al, cidr, nodes, pods)
			if !owned {
				rep.Unowned++
			}
			if leaked && !young[al.Handle] {
				rep.Leaks = append(rep.Leaks, l)
			}
		}
	}
	for h := range handles {
		if !inUse[h] && !young[h] {
			rep.OrphanHandles = append(rep.OrphanHandles, h)
		}
	}
	slices.Sort(rep.OrphanHandles)
	al, err := a.c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing block affinities: %w", err)
	}
	for _, r := range al.Items {
		ba := r.(*v3.BlockAffinity)
		n := ba.Spec.Node
		if !nodes[n] && !slices.Contains(rep.DeadNodes, n) {
			rep.DeadNodes = append(rep.DeadNodes, n)
		}
		cidr, err := netip.ParsePrefix(ba.Spec.CIDR)
		if err == nil && owner[cidr] != AffinityValue(n) && now.Sub(ba.CreationTimestamp.Time) >= grace {
			rep.StaleAffinities = append(rep.StaleAffinities, ba.Name)
		}
	}
	slices.Sort(rep.DeadNodes)
	return rep, nil
}

type podKey struct{ ns, pod string }

// podIndex maps namespace/pod to the addresses of its endpoints.
func podIndex(items []v3.Resource) map[podKey][]netip.Addr {
	out := map[podKey][]netip.Addr{}
	for _, r := range items {
		w := r.(*v3.WorkloadEndpoint)
		k := podKey{w.Namespace, w.Spec.Pod}
		if k.pod == "" {
			k.pod = w.Spec.Workload
		}
		ips := out[k]
		if ips == nil {
			ips = []netip.Addr{}
		}
		for _, n := range w.Spec.IPNetworks {
			if p, ok := parseIPOrCIDR(n); ok {
				ips = append(ips, p.Addr())
			}
		}
		out[k] = ips
	}
	return out
}

// judge decides whether one allocation is leaked. A pod whose endpoint
// lists addresses must list this one; an endpoint without addresses yet
// (being set up) keeps all of its pod's allocations.
func judge(al Allocated, cidr netip.Prefix, nodes map[string]bool, pods map[podKey][]netip.Addr) (Leak, bool, bool) {
	l := Leak{IP: al.IP, Block: cidr, Handle: al.Handle, Seq: al.Seq,
		Namespace: al.Attrs[AttrNamespace], Pod: al.Attrs[AttrPod], Node: al.Attrs[AttrNode]}
	switch {
	case l.Namespace != "" && l.Pod != "":
		ips, ok := pods[podKey{l.Namespace, l.Pod}]
		if !ok {
			l.Reason = "workload endpoint " + l.Namespace + "/" + l.Pod + " does not exist"
			return l, true, true
		}
		if len(ips) > 0 && !slices.Contains(ips, al.IP) {
			l.Reason = "workload endpoint " + l.Namespace + "/" + l.Pod + " has other addresses"
			return l, true, true
		}
		return l, false, true
	case l.Node != "":
		if !nodes[l.Node] {
			l.Reason = "node " + l.Node + " does not exist"
			return l, true, true
		}
		return l, false, true
	}
	return l, false, false
}

// ReleaseLeaks frees the leaks of a report and the blocks of its dead
// nodes. Each leak is re-checked just before: its owner is looked up again
// and the address is released only if it still carries the same handle and
// sequence number, so an owner that came back or an address reassigned
// since is never touched. It returns what it freed.
func (a *Allocator) ReleaseLeaks(ctx context.Context, rep *GCReport) ([]Leak, error) {
	var freed []Leak
	var errs []error
	for _, l := range rep.Leaks {
		still, err := a.stillLeaked(ctx, l, rep.Grace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !still {
			continue
		}
		got, err := a.releaseInBlock(ctx, l.Block, []netip.Addr{l.IP}, l.Handle, map[netip.Addr]uint64{l.IP: l.Seq})
		if err != nil {
			if !errors.Is(err, datastore.ErrNotFound) {
				errs = append(errs, fmt.Errorf("releasing leaked %s: %w", l.IP, err))
			}
			continue
		}
		if len(got) == 0 {
			continue
		}
		if l.Handle != "" {
			if err := a.changeHandle(ctx, l.Handle, func(m map[string]int) { m[l.Block.String()]-- }); err != nil {
				errs = append(errs, err)
			}
		}
		a.log.Info("released leaked address", "ip", l.IP, "handle", l.Handle, "reason", l.Reason)
		freed = append(freed, l)
	}
	for _, cidr := range rep.EmptyUnaffineBlocks {
		b, err := a.getBlock(ctx, cidr)
		if errors.Is(err, datastore.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if b.Spec.Affinity != nil || !IsEmpty(b) {
			continue
		}
		_, err = a.c.Delete(ctx, blockKey(cidr), datastore.DeleteOptions{ResourceVersion: b.ResourceVersion})
		a.storeBlock(cidr, nil)
		if err != nil && !errors.Is(err, datastore.ErrNotFound) && !errors.Is(err, datastore.ErrConflict) {
			errs = append(errs, fmt.Errorf("deleting empty block %s: %w", cidr, err))
		}
	}
	for _, name := range rep.StaleAffinities {
		if err := a.deleteStaleAffinity(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	for _, h := range rep.OrphanHandles {
		if err := a.deleteOrphanHandle(ctx, h); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range rep.DeadNodes {
		_, err := a.c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: n})
		if err == nil {
			continue // the node is back
		}
		if !errors.Is(err, datastore.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		if _, err := a.ReleaseNodeBlocks(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return freed, errors.Join(errs...)
}

// stillLeaked looks the leak's owner up again.
func (a *Allocator) stillLeaked(ctx context.Context, l Leak, grace time.Duration) (bool, error) {
	if l.Handle != "" && grace > 0 {
		h, err := a.c.Get(ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: HandleName(l.Handle)})
		switch {
		case err == nil:
			if a.cfg.Now().Sub(h.GetCreationTimestamp().Time) < grace {
				return false, nil
			}
		case !errors.Is(err, datastore.ErrNotFound):
			return false, fmt.Errorf("re-checking %s: %w", l.IP, err)
		}
	}
	nodes := map[string]bool{}
	pods := map[podKey][]netip.Addr{}
	if l.Namespace != "" && l.Pod != "" {
		wl, err := a.c.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: l.Namespace})
		if err == nil {
			err = wl.Complete()
		}
		if err != nil {
			return false, fmt.Errorf("re-checking %s: %w", l.IP, err)
		}
		pods = podIndex(wl.Items)
	} else if l.Node != "" {
		_, err := a.c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: l.Node})
		switch {
		case err == nil:
			nodes[l.Node] = true
		case !errors.Is(err, datastore.ErrNotFound):
			return false, fmt.Errorf("re-checking %s: %w", l.IP, err)
		}
	}
	_, leaked, _ := judge(Allocated{IP: l.IP, Handle: l.Handle, Seq: l.Seq, Attrs: map[string]string{
		AttrNamespace: l.Namespace, AttrPod: l.Pod, AttrNode: l.Node}}, l.Block, nodes, pods)
	return leaked, nil
}

// deleteOrphanHandle deletes a handle after re-checking that none of the
// blocks it names holds an address for it, conditional on the handle not
// having changed since.
func (a *Allocator) deleteOrphanHandle(ctx context.Context, handle string) error {
	k := datastore.Key{Kind: v3.KindIPAMHandle, Name: HandleName(handle)}
	r, err := a.c.Get(ctx, k)
	if errors.Is(err, datastore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("re-checking handle %s: %w", handle, err)
	}
	h := r.(*v3.IPAMHandle)
	for c := range h.Spec.Block {
		cidr, err := netip.ParsePrefix(c)
		if err != nil {
			continue
		}
		b, err := a.getBlock(ctx, cidr)
		if errors.Is(err, datastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("re-checking handle %s: %w", handle, err)
		}
		if slices.ContainsFunc(Allocations(b), func(al Allocated) bool { return al.Handle == handle }) {
			return nil // in use after all
		}
	}
	_, err = a.c.Delete(ctx, k, datastore.DeleteOptions{ResourceVersion: h.ResourceVersion})
	if err != nil && !errors.Is(err, datastore.ErrNotFound) && !errors.Is(err, datastore.ErrConflict) {
		return fmt.Errorf("deleting orphan handle %s: %w", handle, err)
	}
	return nil
}

// deleteStaleAffinity re-checks that the affinity's block is missing or
// not the node's, then deletes the affinity if it has not changed since.
func (a *Allocator) deleteStaleAffinity(ctx context.Context, name string) error {
	k := datastore.Key{Kind: v3.KindBlockAffinity, Name: name}
	r, err := a.c.Get(ctx, k)
	if errors.Is(err, datastore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("re-checking affinity %s: %w", name, err)
	}
	ba := r.(*v3.BlockAffinity)
	cidr, err := netip.ParsePrefix(ba.Spec.CIDR)
	if err != nil {
		return nil
	}
	b, err := a.getBlock(ctx, cidr)
	switch {
	case err == nil:
		if b.Spec.Affinity != nil && *b.Spec.Affinity == AffinityValue(ba.Spec.Node) {
			return nil // the block is the node's after all
		}
	case !errors.Is(err, datastore.ErrNotFound):
		return fmt.Errorf("re-checking affinity %s: %w", name, err)
	}
	_, err = a.c.Delete(ctx, k, datastore.DeleteOptions{ResourceVersion: ba.ResourceVersion})
	if err != nil && !errors.Is(err, datastore.ErrNotFound) && !errors.Is(err, datastore.ErrConflict) {
		return fmt.Errorf("deleting stale affinity %s: %w", name, err)
	}
	a.forgetAffinity(ba.Spec.Node, cidr)
	return nil
}
