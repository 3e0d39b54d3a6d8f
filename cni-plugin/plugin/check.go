package plugin

import (
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/tabbynet/tabby/cni-plugin/wiring"
	"github.com/tabbynet/tabby/ipam"
)

// Check verifies the pod's interface, addresses and routes, the node's
// side, and the IPAM allocation against the ADD result, reporting every
// difference.
func (p *Plugin) Check(a *skel.CmdArgs) error {
	if err := p.check(a); err != nil {
		return toCNI(err, "checking the pod network")
	}
	return nil
}

func (p *Plugin) check(a *skel.CmdArgs) error {
	c, err := p.parse(a)
	if err != nil {
		return err
	}
	if c.idErr != nil {
		return c.idErr
	}
	if err := c.conf.DecodePrevResult(); err != nil {
		return err
	}
	if err := version.ParsePrevResult(&c.conf.PluginConf); err != nil {
		return types.NewError(types.ErrDecodingFailure, "reading prevResult", err.Error())
	}
	if c.conf.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "CHECK needs prevResult", "")
	}
	prev, err := current.GetResult(c.conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "reading prevResult", err.Error())
	}
	var addrs []net.IPNet
	for _, ip := range prev.IPs {
		addrs = append(addrs, hostPrefix(ip.Address.IP))
	}
	if len(addrs) == 0 {
		// Every ADD result of this plugin has an address: with none
		// there would be nothing to check against.
		return types.NewError(types.ErrInvalidNetworkConfig, "prevResult lists no address: it is not a result of this plugin's ADD", "")
	}
	hostNS, err := p.HostNS()
	if err != nil {
		return err
	}
	defer hostNS.Close()
	diffs := wiring.Check(wiring.Pod{NetNSPath: a.Netns, ContainerIf: a.IfName, HostIf: c.id.hostIf, Owner: c.id.handle, Addrs: addrs, HostNS: hostNS})

	ctx, cancel := p.ctx()
	defer cancel()
	if c.conf.IPAM.Type == CalicoIPAM {
		client, err := p.NewClient(c.conf)
		if err != nil {
			return err
		}
		defer client.Close()
		held, err := ipam.New(client, ipam.Config{}).IPsByHandle(ctx, c.id.handle)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("IPAM handle %s: %v", c.id.handle, err))
		}
		for _, want := range addrs {
			found := false
			for _, h := range held {
				if h == toAddr(want) {
					found = true
				}
			}
			if err == nil && !found {
				diffs = append(diffs, fmt.Sprintf("address %s is not allocated to %s", want.IP, c.id.handle))
			}
		}
	} else if err := invoke.DelegateCheck(ctx, c.conf.IPAM.Type, a.StdinData, p.Exec); err != nil {
		diffs = append(diffs, fmt.Sprintf("IPAM plugin %s: %v", c.conf.IPAM.Type, err))
	}
	if len(diffs) > 0 {
		return types.NewError(ErrCodeCheckFailed, "the pod network differs from its ADD result", strings.Join(diffs, "; "))
	}
	return nil
}
