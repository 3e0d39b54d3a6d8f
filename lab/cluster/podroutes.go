package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// podRouteProto marks the routes PodRoutes owns in the control plane's
// namespace (nothing else there sets one).
const podRouteProto = netlink.RouteProtocol(77)

// podRouteTable holds those routes; only what the control plane itself
// sends looks them up (rule "iif lo", podRouteRulePriority): a packet a
// node forwards through the control plane (its default gateway) never
// takes them, so a node that lacks a route to a pod is not rescued by the
// harness and the cluster tests still see it.
const (
	podRouteTable        = 77
	podRouteRulePriority = 77
)

// PodRoutes keeps, in the network namespace it runs in (the control
// plane's), a /32 route to every pod's address via the address of the
// node running it, from a watch of the pods: kube-apiserver then reaches
// pods (its pods/proxy and services/proxy) as it does on a control plane
// that is a node of the pod network. The routes go to the pod's own node,
// so the way back (the node's default route, the control plane) is the
// same path and no node sees half a connection. It runs until ctx ends
// (`tabby-lab cluster pod-routes`, one process per cluster, started by Up
// inside the control plane's namespace).
func PodRoutes(ctx context.Context, kubeconfig string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(kc, 0)
	pods := factory.Core().V1().Pods()
	kick := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, n any) { poke(n) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return ctx.Err()
	}
	resync := time.NewTicker(30 * time.Second)
	defer resync.Stop()
	for {
		list, err := pods.Lister().List(labels.Everything())
		if err == nil {
			err = syncPodRoutes(desiredPodRoutes(list))
		}
		if err != nil {
			slog.Error("pod routes", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-resync.C:
		}
	}
}

// desiredPodRoutes maps each pod's address to its node's: pods on the pod
// network (not the node's own address) that have not finished; of two
// pods with one address, the newer.
func desiredPodRoutes(pods []*corev1.Pod) map[netip.Addr]netip.Addr {
	want := map[netip.Addr]netip.Addr{}
	newest := map[netip.Addr]time.Time{}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		via, err := netip.ParseAddr(p.Status.HostIP)
		if err != nil {
			continue
		}
		for _, pip := range p.Status.PodIPs {
			ip, err := netip.ParseAddr(pip.IP)
			if err != nil || ip == via || ip.Is4() != via.Is4() {
				continue
			}
			if t, ok := newest[ip]; ok && p.CreationTimestamp.Time.Before(t) {
				continue
			}
			want[ip], newest[ip] = via, p.CreationTimestamp.Time
		}
	}
	return want
}

// syncPodRoutes makes the namespace's routes marked podRouteProto exactly
// want.
func syncPodRoutes(want map[netip.Addr]netip.Addr) error {
	if err := ensurePodRouteRules(); err != nil {
		return err
	}
	have, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: podRouteProto, Table: podRouteTable},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	for _, r := range have {
		ip, _ := netip.AddrFromSlice(r.Dst.IP)
		gw, _ := netip.AddrFromSlice(r.Gw)
		if via, ok := want[ip.Unmap()]; ok && via == gw.Unmap() {
			delete(want, ip.Unmap())
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			return fmt.Errorf("removing the route to %s: %w", r.Dst, err)
		}
	}
	for ip, via := range want {
		bits := ip.BitLen()
		r := &netlink.Route{Dst: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(bits, bits)}, Gw: via.AsSlice(),
			Protocol: podRouteProto, Table: podRouteTable}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("route to %s via %s: %w", ip, via, err)
		}
	}
	return nil
}

// startPodRoutes starts `tabby-lab cluster pod-routes` in the control
// plane's namespace, as the admin.
func (c *Cluster) startPodRoutes() error {
	_, err := c.spawn("pod-routes", c.inCP(filepath.Join(c.Bin, "tabby-lab"), "cluster", "pod-routes",
		"--kubeconfig", filepath.Join(c.Dir, "cp.kubeconfig"))...)
	return err
}

// ensurePodRouteRules makes the rules "iif lo lookup podRouteTable" (both
// families) exist.
func ensurePodRouteRules() error {
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := netlink.RuleList(family)
		if err != nil {
			return fmt.Errorf("listing rules: %w", err)
		}
		found := false
		for _, r := range rules {
			found = found || r.Table == podRouteTable && r.IifName == "lo" && r.Priority == podRouteRulePriority
		}
		if found {
			continue
		}
		r := netlink.NewRule()
		r.Family, r.Table, r.IifName, r.Priority = family, podRouteTable, "lo", podRouteRulePriority
		if err := netlink.RuleAdd(r); err != nil {
			return fmt.Errorf("adding the rule iif lo lookup %d: %w", podRouteTable, err)
		}
	}
	return nil
}
