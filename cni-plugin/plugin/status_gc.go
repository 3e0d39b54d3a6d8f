package plugin

import (
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/ipam"
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

// GC releases this node's calico-ipam allocations whose container is not
// among the runtime's valid attachments.
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
	valid := map[string]bool{}
	for _, v := range conf.ValidAttachments {
		valid[v.ContainerID] = true
	}
	client, err := p.NewClient(conf)
	if err != nil {
		return toCNI(err, "connecting to the datastore")
	}
	defer client.Close()
	ctx, cancel := p.ctx()
	defer cancel()
	alloc := ipam.New(client, ipam.Config{})
	mine, err := alloc.ListAllocations(ctx, func(al ipam.Allocated) bool { return al.Attrs[ipam.AttrNode] == node })
	if err != nil {
		return toCNI(err, "listing this node's allocations")
	}
	released := map[string]bool{}
	for _, al := range mine {
		cid, ok := strings.CutPrefix(al.Handle, conf.Name+".")
		if !ok || valid[cid] || released[al.Handle] {
			continue
		}
		if _, err := alloc.ReleaseByHandle(ctx, al.Handle); err != nil {
			return toCNI(err, "releasing "+al.Handle)
		}
		released[al.Handle] = true
	}
	return nil
}
