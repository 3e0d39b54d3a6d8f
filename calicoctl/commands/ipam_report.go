package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// calicoReport is the file Calico's `calicoctl ipam check -o` writes and
// its `ipam release --from-report` reads (field names and JSON keys as
// Calico's CheckReport), which Tabby writes too. Tabby's own findings
// (leaks with their reasons, deleted nodes' blocks, empty blocks, ...)
// ride along under "tabby", a key Calico's calicoctl ignores, so either
// tool can release from a report of either.
type calicoReport struct {
	Version             string                         `json:"version"`
	ClusterGUID         string                         `json:"clusterGUID"`
	DatastoreLocked     bool                           `json:"datastoreLocked"`
	ClusterInfoRevision string                         `json:"clusterInformationRevision"`
	ClusterType         string                         `json:"clusterType"`
	Allocations         map[string][]*reportAllocation `json:"allocations"`
	LeakedHandles       []reportHandle                 `json:"leakedHandles,omitempty"`
	Tabby               *checkReport                   `json:"tabby,omitempty"`
}

// reportAllocation is one IPAM allocation of an address, as Calico's
// report describes it. InUse false (and not CoolingDown) means leaked.
type reportAllocation struct {
	IP                string   `json:"ip"`
	Handle            string   `json:"handle,omitempty"`
	SequenceNumber    *uint64  `json:"sequenceNumber,omitempty"`
	Pod               string   `json:"pod,omitempty"`
	Namespace         string   `json:"namespace,omitempty"`
	Node              string   `json:"node,omitempty"`
	Type              string   `json:"type,omitempty"`
	CreationTimestamp string   `json:"creationTimestamp,omitempty"`
	InUse             bool     `json:"inUse"`
	Borrowed          bool     `json:"borrowed,omitempty"`
	CoolingDown       bool     `json:"coolingDown,omitempty"`
	Owners            []string `json:"owners"`
}

// reportHandle is a handle nothing uses (Calico's HandleInfo, whose JSON
// keys are its Go field names).
type reportHandle struct {
	ID       string
	UID      *types.UID
	Revision string
}

// attrString is how Calico's check prints an allocation's attributes.
func attrString(al ipam.Allocated) string {
	h := "<none>"
	if al.Handle != "" {
		h = al.Handle
	}
	keys := slices.Sorted(maps.Keys(al.Attrs))
	kvs := make([]string, len(keys))
	for i, k := range keys {
		kvs[i] = k + "=" + al.Attrs[k]
	}
	return fmt.Sprintf("Main:%s Extra:%s", h, strings.Join(kvs, ","))
}

// ipOwners maps each address endpoints and nodes use to Calico's names
// for them: Workload(namespace/name), Node(name).
func ipOwners(ctx context.Context, c datastore.Client) (map[netip.Addr][]string, error) {
	owners := map[netip.Addr][]string{}
	add := func(s, who string) {
		if p, err := netip.ParsePrefix(s); err == nil {
			owners[p.Addr()] = append(owners[p.Addr()], who)
		} else if ip, err := netip.ParseAddr(s); err == nil {
			owners[ip.Unmap()] = append(owners[ip.Unmap()], who)
		}
	}
	nl, err := c.List(ctx, v3.KindNode, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", friendly(err))
	}
	for _, r := range nl.Items {
		n := r.(*v3.Node)
		who := fmt.Sprintf("Node(%s)", n.Name)
		add(n.Spec.IPv4VXLANTunnelAddr, who)
		add(n.Spec.IPv6VXLANTunnelAddr, who)
		if n.Spec.BGP != nil {
			add(n.Spec.BGP.IPv4IPIPTunnelAddr, who)
		}
		if n.Spec.Wireguard != nil {
			add(n.Spec.Wireguard.InterfaceIPv4Address, who)
			add(n.Spec.Wireguard.InterfaceIPv6Address, who)
		}
	}
	wl, err := c.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing workload endpoints: %w", friendly(err))
	}
	for _, r := range wl.Items {
		w := r.(*v3.WorkloadEndpoint)
		for _, n := range w.Spec.IPNetworks {
			add(n, fmt.Sprintf("Workload(%s/%s)", w.Namespace, w.Name))
		}
	}
	return owners, nil
}

// buildCalicoReport describes every allocation in Calico's report format:
// in use unless Tabby's check found it leaked (an allocation the check
// spared, e.g. within --grace, is in use: Calico's release frees every
// allocation not in use).
func buildCalicoReport(ctx context.Context, c datastore.Client, st *ipamState, cr *checkReport, owners map[netip.Addr][]string) (*calicoReport, error) {
	rep := &calicoReport{Version: cr.Version, Allocations: map[string][]*reportAllocation{}, Tabby: cr}
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
	switch {
	case err == nil:
		ci := r.(*v3.ClusterInformation)
		rep.ClusterGUID, rep.ClusterType, rep.ClusterInfoRevision = ci.Spec.ClusterGUID, ci.Spec.ClusterType, ci.ResourceVersion
		rep.DatastoreLocked = ci.Spec.DatastoreReady != nil && !*ci.Spec.DatastoreReady
	case !isNotFound(err):
		return nil, fmt.Errorf("reading ClusterInformation: %w", friendly(err))
	}
	leaked := map[netip.Addr]uint64{}
	for _, l := range cr.Leaks {
		leaked[l.IP] = l.Seq
	}
	for _, b := range st.blocks {
		blockOwner := ""
		if b.Spec.Affinity != nil {
			blockOwner = strings.TrimPrefix(*b.Spec.Affinity, "host:")
		}
		for _, al := range ipam.Allocations(b) {
			seq := al.Seq
			node := blockOwner
			if n := al.Attrs[ipam.AttrNode]; n != "" {
				node = n
			}
			ra := &reportAllocation{
				IP: al.IP.String(), Handle: al.Handle, SequenceNumber: &seq,
				Pod: al.Attrs[ipam.AttrPod], Namespace: al.Attrs[ipam.AttrNamespace], Node: node,
				Type: al.Attrs[ipam.AttrType], CreationTimestamp: al.Attrs["timestamp"],
				Borrowed: node != blockOwner, Owners: slices.Clone(owners[al.IP]),
			}
			if s, ok := leaked[al.IP]; !ok || s != al.Seq {
				ra.InUse = true
			}
			if ra.Owners == nil {
				ra.Owners = []string{}
			}
			rep.Allocations[ra.IP] = append(rep.Allocations[ra.IP], ra)
		}
	}
	for _, h := range cr.OrphanHandles {
		hr, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: ipam.HandleName(h)})
		if err != nil {
			continue // gone since: nothing to release
		}
		uid := hr.GetUID()
		rep.LeakedHandles = append(rep.LeakedHandles, reportHandle{ID: h, UID: &uid, Revision: hr.GetResourceVersion()})
	}
	return rep, nil
}

// showIPs prints what --show-all-ips and --show-problem-ips ask for, in
// Calico's per-address lines.
func showIPs(w io.Writer, st *ipamState, cr *checkReport, owners map[netip.Addr][]string, all, problems bool) {
	leaked := map[netip.Addr]bool{}
	for _, l := range cr.Leaks {
		leaked[l.IP] = true
	}
	for _, b := range st.blocks {
		for _, al := range ipam.Allocations(b) {
			if all {
				fmt.Fprintf(w, "  %s allocated; attrs %s\n", al.IP, attrString(al))
			}
			if problems && leaked[al.IP] {
				fmt.Fprintf(w, "  %s leaked; attrs %s\n", al.IP, attrString(al))
			}
		}
	}
	ips := slices.SortedFunc(maps.Keys(owners), netip.Addr.Compare)
	for _, ip := range ips {
		if all {
			for _, o := range owners[ip] {
				fmt.Fprintf(w, "  %s belongs to %s\n", ip, o)
			}
		}
		if problems && len(owners[ip]) > 1 {
			fmt.Fprintf(w, "  %s has multiple owners.\n", ip)
		}
	}
}

// reportFile is one --from-report file, either tool's.
type reportFile struct {
	path   string
	calico *calicoReport
	tabby  *checkReport
}

// parseReport reads a report: Calico's format (as Calico's calicoctl
// reads it, unknown keys ignored), with Tabby's findings when Tabby wrote
// it; or Tabby's earlier format (kind TabbyIPAMCheckReport).
func parseReport(path string, data []byte) (*reportFile, error) {
	var probe struct {
		Kind        string          `json:"kind"`
		Allocations json.RawMessage `json:"allocations"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%s is not an ipam check report: %w (write one with calicoctl ipam check -o FILE)", path, err)
	}
	if probe.Kind == reportKind {
		cr, err := decodeTabbyReport(path, data)
		if err != nil {
			return nil, err
		}
		return &reportFile{path: path, tabby: cr}, nil
	}
	if probe.Allocations == nil {
		return nil, fmt.Errorf("%s is not an ipam check report (no \"allocations\"): write one with calicoctl ipam check -o FILE", path)
	}
	var cr calicoReport
	if err := json.Unmarshal(data, &cr); err != nil {
		return nil, fmt.Errorf("%s is not an ipam check report: %w", path, err)
	}
	rf := &reportFile{path: path, calico: &cr}
	if cr.Tabby != nil {
		if cr.Tabby.Kind != reportKind {
			return nil, fmt.Errorf("%s: \"tabby\" is not a Tabby ipam check report (kind %q)", path, cr.Tabby.Kind)
		}
		if _, err := cr.Tabby.gcReport(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rf.tabby = cr.Tabby
	}
	return rf, nil
}

func decodeTabbyReport(path string, data []byte) (*checkReport, error) {
	var cr checkReport
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cr); err != nil {
		return nil, fmt.Errorf("%s is not an ipam check report: %w (write one with calicoctl ipam check -o FILE)", path, err)
	}
	if _, err := cr.gcReport(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &cr, nil
}

// releasePlan turns reports into what ipam.ReleaseLeaks re-checks and
// frees. Calico's rule first: a report of another cluster (clusterGUID)
// is refused. Several reports: only what all of them call leaked (same
// address, handle and sequence number), as Calico intersects them. A
// report Tabby wrote carries its own findings; from Calico's, each
// allocation not in use (and not cooling down) becomes a leak, found in
// its current block with the same handle and sequence number (gone or
// reassigned since: left alone).
func releasePlan(ctx context.Context, c datastore.Client, al *ipam.Allocator, files []*reportFile) (*ipam.GCReport, []string, error) {
	var notes []string
	guid := ""
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
	switch {
	case err == nil:
		guid = r.(*v3.ClusterInformation).Spec.ClusterGUID
	case !isNotFound(err):
		return nil, nil, fmt.Errorf("reading ClusterInformation: %w", friendly(err))
	}
	var current []ipam.Allocation
	var plans []*ipam.GCReport
	for _, f := range files {
		if f.calico != nil && f.calico.ClusterGUID != guid {
			return nil, nil, fmt.Errorf("cluster does not match the provided report (%s): mismatched cluster GUID. Refusing to release", f.path)
		}
		if f.tabby != nil {
			p, _ := f.tabby.gcReport()
			plans = append(plans, p)
			continue
		}
		if current == nil {
			if current, err = al.ListAllocations(ctx, nil); err != nil {
				return nil, nil, fmt.Errorf("listing allocations: %w", friendly(err))
			}
		}
		p := &ipam.GCReport{Grace: defaultGrace}
		for _, h := range f.calico.LeakedHandles {
			p.OrphanHandles = append(p.OrphanHandles, h.ID)
		}
		for _, ras := range f.calico.Allocations {
			for _, ra := range ras {
				if ra.InUse || ra.CoolingDown {
					continue
				}
				l, ok := matchAllocation(current, ra)
				if !ok {
					notes = append(notes, fmt.Sprintf("%s (handle %s) is no longer allocated as in %s: left alone", ra.IP, ra.Handle, f.path))
					continue
				}
				p.Leaks = append(p.Leaks, l)
			}
		}
		plans = append(plans, p)
	}
	slices.Sort(notes)
	return intersectPlans(plans), notes, nil
}

func matchAllocation(current []ipam.Allocation, ra *reportAllocation) (ipam.Leak, bool) {
	ip, err := netip.ParseAddr(ra.IP)
	if err != nil {
		return ipam.Leak{}, false
	}
	for _, cur := range current {
		if cur.IP != ip.Unmap() || cur.Handle != ra.Handle || (ra.SequenceNumber != nil && *ra.SequenceNumber != cur.Seq) {
			continue
		}
		return ipam.Leak{IP: cur.IP, Block: cur.Block, Handle: cur.Handle, Seq: cur.Seq,
			Namespace: ra.Namespace, Pod: ra.Pod, Node: ra.Node, Reason: "not in use in the report"}, true
	}
	return ipam.Leak{}, false
}

// intersectPlans keeps what every plan lists; the longest grace wins.
func intersectPlans(plans []*ipam.GCReport) *ipam.GCReport {
	if len(plans) == 0 {
		return &ipam.GCReport{}
	}
	out := plans[0]
	for _, p := range plans[1:] {
		out.Leaks = slices.DeleteFunc(out.Leaks, func(l ipam.Leak) bool {
			return !slices.ContainsFunc(p.Leaks, func(m ipam.Leak) bool { return m.IP == l.IP && m.Handle == l.Handle && m.Seq == l.Seq })
		})
		keep := func(s []string, in []string) []string {
			return slices.DeleteFunc(s, func(x string) bool { return !slices.Contains(in, x) })
		}
		out.DeadNodes = keep(out.DeadNodes, p.DeadNodes)
		out.OrphanHandles = keep(out.OrphanHandles, p.OrphanHandles)
		out.EmptyUnaffineBlocks = slices.DeleteFunc(out.EmptyUnaffineBlocks, func(b netip.Prefix) bool { return !slices.Contains(p.EmptyUnaffineBlocks, b) })
		out.Grace = max(out.Grace, p.Grace)
	}
	slices.SortFunc(out.Leaks, func(x, y ipam.Leak) int { return x.IP.Compare(y.IP) })
	return out
}

// defaultGrace is ipam check's --grace default, also the re-check's for
// Calico's reports (which carry none).
const defaultGrace = time.Minute
