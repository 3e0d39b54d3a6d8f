package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/cni-plugin/wiring"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/cniipam"
)

// collector removes stale attachments for GC, each one whole or not at
// all (see Plugin.GC).
type collector struct {
	p      *Plugin
	conf   *netconf.NetConf
	client datastore.Client
	alloc  *ipam.Allocator
	hostNS ns.NetNS
	pods   Pods // Kubernetes mode only

	veths     map[string]string // host veth name -> owner mark
	endpoints map[string]*v3.WorkloadEndpoint
}

// load reads the node's veths and the endpoints (etcd mode), keyed by
// the IPAM handle their attachment has.
func (g *collector) load(ctx context.Context) error {
	var err error
	if g.veths, err = wiring.HostVeths(g.hostNS); err != nil {
		return fmt.Errorf("listing the node's veths: %w", err)
	}
	if g.p.PodsFor != nil {
		if pods, ok := g.p.PodsFor(g.client); ok {
			g.pods = pods
			return nil
		}
	}
	l, err := g.client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing WorkloadEndpoints: %w", err)
	}
	g.endpoints = map[string]*v3.WorkloadEndpoint{}
	for _, o := range l.Items {
		w := o.(*v3.WorkloadEndpoint)
		g.endpoints[cniipam.HandleID(g.conf.Name, w.Spec.ContainerID, w.Spec.Endpoint)] = w
	}
	return nil
}

// collect removes the attachment whose handle is h: veth, endpoint, then
// addresses, stopping at the first part it cannot remove.
func (g *collector) collect(ctx context.Context, h string, al ipam.Allocated) error {
	wep := g.endpoints[h]
	// The veth the endpoint names, or (no endpoint) the one the pod's
	// eth0 has, must be this attachment's or someone else's, never
	// unknown: an unmarked veth may be this attachment's still in use.
	var named []string
	if wep != nil {
		named = append(named, wep.Spec.InterfaceName)
	}
	if ns, pod := al.Attrs[ipam.AttrNamespace], al.Attrs[ipam.AttrPod]; ns != "" && pod != "" && !strings.Contains(strings.TrimPrefix(h, g.conf.Name+"."), ".") {
		named = append(named, wiring.HostVethName(ns, pod))
	}
	for _, name := range named {
		if mark, exists := g.veths[name]; exists && mark == "" {
			slog.Warn("GC keeps an attachment: its veth carries no owner mark", "handle", h, "veth", name)
			return nil
		}
	}
	mark := wiring.OwnerMark(h)
	for name, m := range g.veths {
		if m != mark {
			continue
		}
		if err := wiring.Teardown(g.hostNS, name, h, ""); err != nil {
			return err
		}
		delete(g.veths, name)
	}
	if err := g.removeEndpoint(ctx, h, al, wep); err != nil {
		return err
	}
	if _, err := g.alloc.ReleaseByHandle(ctx, h); err != nil && !errors.Is(err, ipam.ErrHandleNotFound) {
		return err
	}
	attemptsIn(g.p.HintDir).done(h)
	return nil
}

func (g *collector) removeEndpoint(ctx context.Context, h string, al ipam.Allocated, wep *v3.WorkloadEndpoint) error {
	if g.pods != nil {
		// Kubernetes mode: only eth0 attachments are recorded, on the pod.
		cid := strings.TrimPrefix(h, g.conf.Name+".")
		ns, pod := al.Attrs[ipam.AttrNamespace], al.Attrs[ipam.AttrPod]
		if ns == "" || pod == "" {
			return nil
		}
		return g.pods.Release(ctx, ns, pod, cid)
	}
	if wep == nil {
		return nil
	}
	_, err := g.client.Delete(ctx, datastore.KeyOf(wep), datastore.DeleteOptions{ResourceVersion: wep.GetResourceVersion()})
	if errors.Is(err, datastore.ErrNotFound) {
		err = nil
	}
	return err
}
