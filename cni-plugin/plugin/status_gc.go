package plugin

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/cniipam"
)

// Status reports whether ADD can succeed: the datastore answers and a
// usable pool exists. Otherwise it fails with code 50.
func (p *Plugin) Status(a *skel.CmdArgs) error {
	conf, err := netconf.Parse(a.StdinData)
	if err != nil {
		return toCNI(err, "reading the network configuration")
	}
	client, err := p.NewClient(conf)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "the datastore is not configured correctly", err.Error())
	}
	defer client.Close()
	if conf.IPAM.Type != CalicoIPAM {
		return nil
	}
	ctx, cancel := p.ctx()
	defer cancel()
	if err := ipam.New(client, ipam.Config{}).Usable(ctx); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "cannot allocate pod addresses", err.Error())
	}
	return nil
}

// GC removes this node's calico-ipam attachments whose container and
// interface are not among the runtime's valid attachments, each one
// whole: its host veth (and with it the node route), then its
// WorkloadEndpoint, and last its addresses. An attachment any part of
// which cannot be removed, or whose veth cannot be told to be its own (an
// unmarked one), keeps its addresses: GC never frees an address that a
// veth or an endpoint still uses.
func (p *Plugin) GC(a *skel.CmdArgs) error {
	conf, err := netconf.Parse(a.StdinData)
	if err != nil {
		return toCNI(err, "reading the network configuration")
	}
	if conf.IPAM.Type != CalicoIPAM {
		return nil // the delegated IPAM plugin garbage-collects its own
	}
	node, err := conf.ResolveNodename(p.Hostname)
	if err != nil {
		return toCNI(err, "finding the node name")
	}
	keep := map[string]bool{}
	for _, v := range conf.ValidAttachments {
		keep[cniipam.HandleID(conf.Name, v.ContainerID, v.IfName)] = true
	}
	client, err := p.NewClient(conf)
	if err != nil {
		return toCNI(err, "connecting to the datastore")
	}
	defer client.Close()
	ctx, cancel := p.ctx()
	defer cancel()
	alloc := ipam.New(client, ipam.Config{})
	prefix := conf.Name + "."
	mine, err := alloc.ListAllocations(ctx, func(al ipam.Allocated) bool {
		return al.Attrs[ipam.AttrNode] == node && strings.HasPrefix(al.Handle, prefix) && !keep[al.Handle]
	})
	if err != nil {
		return toCNI(err, "listing this node's allocations")
	}
	stale := map[string]ipam.Allocated{}
	for _, al := range mine {
		if _, seen := stale[al.Handle]; !seen {
			stale[al.Handle] = al.Allocated
		}
	}
	if len(stale) == 0 {
		return nil
	}
	hostNS, err := p.HostNS()
	if err != nil {
		return toCNI(fmt.Errorf("opening the node's namespace: %w", err), "collecting garbage")
	}
	defer hostNS.Close()
	g := &collector{p: p, conf: conf, client: client, alloc: alloc, hostNS: hostNS}
	if err := g.load(ctx); err != nil {
		return toCNI(err, "collecting garbage")
	}
	handles := make([]string, 0, len(stale))
	for h := range stale {
		handles = append(handles, h)
	}
	sort.Strings(handles)
	var errs []error
	for _, h := range handles {
		if err := g.collect(ctx, h, stale[h]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return toCNI(err, "collecting garbage")
	}
	return nil
}
